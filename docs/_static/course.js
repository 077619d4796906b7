/* Display equations a little wider than their box are scaled down to fit it (MathJax 3 cannot
   break a line), to no less than MIN_SCALE; a wider one scrolls inside its own box (course.css).
   window.courseMathFitted settles once a page's equations are fitted (the browser test waits). */
(() => {
  const MIN_SCALE = 0.8;
  const fit = () => {
    for (const math of document.querySelectorAll('mjx-container[display="true"]')) {
      math.style.fontSize = math.dataset.courseFontSize ?? math.style.fontSize;
      math.dataset.courseFontSize = math.style.fontSize;
      const scale = math.clientWidth / math.scrollWidth;
      if (scale < 1 && scale >= MIN_SCALE) {
        const size = parseFloat(getComputedStyle(math).fontSize);
        math.style.fontSize = `${Math.floor(size * scale * 10) / 10}px`;
      }
    }
  };
  const loaded = new Promise((ok) => window.addEventListener("load", ok));
  window.courseMathFitted = loaded
    .then(() => window.MathJax?.startup?.promise)
    .then(fit);
  let pending;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(fit, 100);
  });
})();
/* Each figure of a lesson or lab links to its full-size image: scaled to the column on a phone,
   the whole figure at its own size is a tap away. */
(() => {
  const link = () => {
    for (const img of document.querySelectorAll("div.cell_output img")) {
      if (img.closest("a")) continue;
      const a = document.createElement("a");
      a.href = img.getAttribute("src");
      a.className = "course-figure";
      a.title = "Open the full-size figure";
      img.replaceWith(a);
      a.append(img);
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", link);
  else link();
})();
