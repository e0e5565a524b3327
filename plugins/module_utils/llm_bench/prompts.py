# SPDX-License-Identifier: Apache-2.0
"""The prompts: from a dataset, or random words unique per request."""

from __future__ import annotations

import json
import random

from .records import BenchConfig

# --- requests ----------------------------------------------------------------


def load_dataset(path: str) -> list[str]:
    """Prompts from JSON Lines (a "prompt" field per line) or plain text (one per line)."""
    prompts = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    prompt = json.loads(line)["prompt"]
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"line {number}: expected a JSON object with a 'prompt' field ({exc})") from exc
                prompts.append(str(prompt))
            else:
                prompts.append(line)
    if not prompts:
        raise ValueError("no prompts in the file")
    return prompts


# Plain English words for random prompts: a byte-level BPE tokenizer gives about one token each.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "an",
    "be",
    "this",
    "are",
    "which",
    "or",
    "had",
    "not",
    "but",
    "have",
    "they",
    "were",
    "one",
    "all",
    "their",
    "there",
    "been",
    "has",
    "when",
    "who",
    "will",
    "more",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "into",
    "than",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "could",
    "time",
    "these",
    "two",
    "may",
    "then",
    "do",
    "first",
    "any",
    "my",
    "now",
    "such",
    "like",
    "our",
    "over",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "states",
    "himself",
    "few",
    "house",
    "use",
    "during",
    "without",
    "again",
    "place",
    "around",
    "however",
    "home",
    "small",
    "found",
    "thought",
    "went",
    "say",
    "part",
    "once",
    "general",
    "high",
    "upon",
    "school",
    "every",
    "united",
    "left",
    "number",
    "course",
    "war",
    "until",
    "always",
    "away",
    "something",
    "fact",
    "though",
    "water",
    "less",
    "public",
    "put",
    "think",
    "almost",
    "hand",
    "enough",
    "far",
    "took",
    "head",
    "yet",
    "government",
    "system",
    "better",
    "set",
    "told",
    "nothing",
    "night",
    "end",
    "why",
    "called",
    "eyes",
    "find",
    "going",
    "look",
    "asked",
    "later",
    "knew",
    "point",
    "next",
    "program",
]


def prompt_for(cfg: BenchConfig, n: int) -> str:
    """The n-th request's prompt. Random prompts are unique per request from their first word,
    so a server's prefix cache cannot serve them from an earlier request."""
    if cfg.dataset:
        return cfg.dataset[n % len(cfg.dataset)]
    if cfg.prompt_words:
        rng = random.Random(cfg.seed * 1_000_003 + n)
        low, high = cfg.prompt_words
        return f"{n}-{rng.getrandbits(32):08x} " + " ".join(rng.choices(_WORDS, k=max(0, rng.randint(low, high) - 1)))
    return cfg.prompt


def max_tokens_for(cfg: BenchConfig, n: int) -> int:
    """The n-th request's output length: max_tokens, or drawn around it (``max_tokens_stddev``), seeded
    per request so every run and every worker asks the same lengths."""
    if not cfg.max_tokens_stddev:
        return cfg.max_tokens
    rng = random.Random(cfg.seed * 1_000_003 + n + 0x5EED)
    return max(1, round(rng.gauss(cfg.max_tokens, cfg.max_tokens_stddev)))


def make_prompts(cfg: BenchConfig, count: int) -> list[str]:
    return [prompt_for(cfg, n) for n in range(count)]
