"""A character-level tokenizer: every distinct character of a text is one token.

The one tokenizer of the course: lesson 01 builds it, SumGPT uses it for its 13 symbols, the
BookGPT corpus encodes whole books with it (:meth:`CharTokenizer.encode_array`, vectorized) and
sampling encodes prompts and decodes ids with it. Ids follow the characters' code points.
"""

from __future__ import annotations

import numpy as np


class UnknownCharacterError(ValueError):
    """Text holds characters that are not in the vocabulary; ``chars`` lists them."""

    def __init__(self, chars: list[str]) -> None:
        self.chars = chars
        super().__init__(
            f"characters not in the vocabulary: {chars!r}; remove them or build the tokenizer "
            f"from a text that contains them"
        )


class CharTokenizer:
    """Maps characters to ids (sorted by code point) and back; unknown characters are errors."""

    def __init__(self, text_or_chars) -> None:
        chars = sorted(set(text_or_chars))
        if not chars:
            raise ValueError("cannot build a vocabulary from empty text: pass some characters")
        if any(len(ch) != 1 for ch in chars):
            raise ValueError(
                "a vocabulary holds single characters; pass a string or a list of them"
            )
        self.itos = chars
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        codes = np.array([ord(ch) for ch in chars], dtype=np.int64)
        self._lookup = np.full(int(codes.max()) + 2, -1, dtype=np.int64)  # code point -> id
        self._lookup[codes] = np.arange(len(chars))

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode_array(self, text: str, dtype=np.int64) -> np.ndarray:
        """Ids of ``text`` as a numpy array, vectorized: each code point is looked up in a table
        indexed by code point (fast enough for a whole book; -1 marks an unknown one)."""
        points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        ids = self._lookup[np.minimum(points, len(self._lookup) - 1)]
        bad = ids < 0
        if bad.any():
            raise UnknownCharacterError(sorted({chr(p) for p in points[bad].tolist()}))
        return ids.astype(dtype)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` as a list of ints."""
        return self.encode_array(text).tolist()

    def decode(self, ids) -> str:
        """The text of token ids (a list, numpy array or tensor of integers)."""
        ids = [int(i) for i in np.asarray(ids.cpu() if hasattr(ids, "cpu") else ids).reshape(-1)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"token ids out of range: {bad[:5]}; ids must lie in [0, {self.vocab_size - 1}]"
            )
        return "".join(self.itos[i] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
