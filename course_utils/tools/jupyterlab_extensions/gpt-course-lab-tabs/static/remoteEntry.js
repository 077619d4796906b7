/*
 * gpt-course-lab-tabs: a lab's tab says it is a lab.
 *
 * A lab and its lesson share a file name (labs/01_tokens_and_embeddings.ipynb and
 * notebooks/01_tokens_and_embeddings.ipynb), and a tab shows the file name cut to its first
 * characters, so both tabs read "01_tokens_and_embeddi...". This plugin puts "lab" (or
 * "solution") in front of the name on the tab of a notebook in labs/ (or solutions/). It does so
 * with a class on the tab and a CSS ::before, not by changing the tab's label: JupyterLab renames
 * the file when a document's label changes. The tab's tooltip already shows the whole path.
 *
 * Written out as a module federation container in plain JavaScript, as gpt-course-clean-reopen
 * is (see there), so it needs no build step. Installed by `gpt-course open` / `make course`.
 */
(function () {
  'use strict';
  const NAME = 'gpt-course-lab-tabs';
  // The course folder of a notebook's path -> the word its tab shows before the file name.
  const WORDS = { labs: 'lab', solutions: 'solution' };
  const CSS = Object.entries(WORDS)
    .map(([folder, word]) => `.gpt-course-tab-${folder} .lm-TabBar-tabLabel::before ` +
      `{ content: "${word} "; font-weight: bold; }`)
    .join('\n');
  let notebookModule = null;

  async function sharedModule(shareScope, name) {
    const versions = shareScope[name] || {};
    const entries = Object.values(versions);
    const entry = entries.find(e => e.loaded) || entries.find(e => e.eager) || entries[0];
    if (!entry) {
      throw new Error(`${NAME}: JupyterLab shares no ${name}`);
    }
    return (await entry.get())();
  }

  function folderClass(path) {
    const parts = path.split('/');
    const folder = parts.length > 1 ? parts[parts.length - 2] : '';
    return folder in WORDS ? `gpt-course-tab-${folder}` : '';
  }

  function markTab(panel) {
    const title = panel.title;
    const mark = () => {
      const kept = title.className.split(/\s+/).filter(c => c && !c.startsWith('gpt-course-tab-'));
      const wanted = folderClass(panel.context.path);
      const next = [...kept, wanted].filter(Boolean).join(' ');
      if (next !== title.className.trim()) {
        title.className = next;
      }
    };
    mark();
    panel.context.pathChanged.connect(mark); // moved or renamed into or out of labs/
  }

  const plugin = {
    id: `${NAME}:plugin`,
    description: "A lab's tab says it is a lab.",
    autoStart: true,
    activate: (app, tracker) => {
      const style = document.createElement('style');
      style.id = NAME;
      style.textContent = CSS;
      document.head.appendChild(style);
      tracker.forEach(markTab);
      tracker.widgetAdded.connect((_, panel) => markTab(panel));
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: async shareScope => {
      notebookModule = await sharedModule(shareScope, '@jupyterlab/notebook');
    },
    get: async () => () => ({
      __esModule: true,
      default: Object.assign({ requires: [notebookModule.INotebookTracker] }, plugin)
    })
  };
})();
