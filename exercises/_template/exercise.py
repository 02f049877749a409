"""Template: replace the scenario, keep the four names."""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import model
from exercises.spec import Mistake, Quantity

CANONICAL: dict[str, Any] = {"model": "Llama-3.1-70B", "bytes_per_param": 2}


def generate(rng: random.Random) -> dict[str, Any]:
    return {"model": rng.choice(["Llama-3.1-8B", "Llama-3.1-70B"]),
            "bytes_per_param": rng.choice([1, 2])}


def solve(p: dict[str, Any]) -> dict[str, Any]:
    weight_bytes = model(p["model"]).params * p["bytes_per_param"]
    return {
        "bytes_per_token": Quantity(weight_bytes / 1e9, "GB"),
        "why": "Each step reads every weight once and does about 2 FLOPs per weight.",
        "blocks": "code/reference.py",  # a code part's answer is its reference file
        "weight_bytes": weight_bytes,
    }


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    gb = solve(p)["bytes_per_token"].value
    found = [
        Mistake("bytes_per_token", gb * 1e9 / 2**30, "That is GiB; the part asks for GB (10^9 B).",
                "gib", kind="gb_vs_gib"),
    ]
    # A mistake must differ from the answer: at 1 byte per parameter the count is the bytes.
    if p["bytes_per_param"] != 1:
        found.append(Mistake("bytes_per_token", gb / p["bytes_per_param"],
                             "You counted parameters, not bytes.", "params_not_bytes",
                             kind="wrong_precision"))
    return found
