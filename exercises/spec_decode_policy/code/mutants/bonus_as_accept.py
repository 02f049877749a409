# MUTANT: counts the target's own token (the correction after a rejection) as an accepted draft.
"""A known-buggy solution the checks must reject."""
from __future__ import annotations

from collections.abc import Callable

EPS = 1e-9


def _check_alpha_k(alpha: float, k: int) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def expected_tokens(alpha: float, k: int) -> float:
    """1 + alpha + ... + alpha^k: the drafts accepted before the first rejection, plus the token
    the target always adds."""
    _check_alpha_k(alpha, k)
    if alpha == 1.0:
        return float(k + 1)  # the closed form divides by zero here
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def _step_ms(n: int, t_mem_ms: float, n_knee: int) -> float:
    """Roofline step time: flat (memory-bound) up to the knee, then proportional to tokens."""
    return t_mem_ms * max(1.0, n / n_knee)


def step_cost(k: int, batch: int, c: float, t_mem_ms: float, n_knee: int) -> float:
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    verify = _step_ms(batch * (k + 1), t_mem_ms, n_knee) / _step_ms(batch, t_mem_ms, n_knee)
    return k * c + verify


def speedup(alpha: float, k: int, batch: int, c: float, t_mem_ms: float, n_knee: int) -> float:
    return expected_tokens(alpha, k) / step_cost(k, batch, c, t_mem_ms, n_knee)


def best_k(alpha: float, batch: int, c: float, t_mem_ms: float, n_knee: int,
           k_max: int = 8, margin: float = 0.0) -> int:
    _check_alpha_k(alpha, k_max)
    best, best_s = 0, speedup(alpha, 0, batch, c, t_mem_ms, n_knee)
    for k in range(1, k_max + 1):
        s = speedup(alpha, k, batch, c, t_mem_ms, n_knee)
        if s > best_s * (1 + EPS):
            best, best_s = k, s
    return best if best_s >= 1 + margin else 0


class SpecPolicy:
    def __init__(self, k_max: int = 8, ewma: float = 0.1, prior_alpha: float = 0.6,
                 margin: float = 0.05) -> None:
        if k_max < 0:
            raise ValueError(f"k_max must be >= 0, got {k_max}")
        if not 0.0 < ewma <= 1.0:
            raise ValueError(f"ewma must be in (0, 1], got {ewma}")
        if not 0.0 <= prior_alpha <= 1.0:
            raise ValueError(f"prior_alpha must be in [0, 1], got {prior_alpha}")
        self.k_max = k_max
        self.ewma = ewma
        self.prior_alpha = prior_alpha
        self.margin = margin
        self._alpha: dict[str, float] = {}

    def observe(self, req_id: str, drafted: int, accepted: int) -> None:
        if drafted < 0 or accepted < 0 or accepted > drafted:
            raise ValueError(f"need 0 <= accepted <= drafted, got {accepted} of {drafted}")
        est = self._alpha.get(req_id, self.prior_alpha)
        # Positions 1..accepted were accepted; position accepted+1 (if any) was the first
        # rejection; the target never judged the ones after it, so they say nothing about alpha.
        examined = min(accepted + 1, drafted)
        for j in range(1, examined + 1):
            x = 1.0 if j <= accepted + 1 else 0.0
            est = (1.0 - self.ewma) * est + self.ewma * x
        self._alpha[req_id] = est

    def estimate(self, req_id: str) -> float:
        return self._alpha.get(req_id, self.prior_alpha)

    def choose(self, req_ids: list[str], batch_cost: Callable[[int], float]) -> dict[str, int]:
        b = len(req_ids)
        if b == 0:
            return {}
        alphas = [self.estimate(r) for r in req_ids]
        eligible = set(range(b))
        while True:
            gains = sorted(((alphas[i] ** j, i, j) for i in sorted(eligible)
                            for j in range(1, self.k_max + 1)),
                           key=lambda g: (-g[0], g[1], g[2]))
            plain = batch_cost(b)
            best_k_total, best_g, total = 0, b / plain, float(b)
            for n, (gain, _, _) in enumerate(gains, start=1):
                total += gain
                g = total / batch_cost(b + n)
                if g > best_g * (1 + EPS):
                    best_k_total, best_g = n, g
            ks = [0] * b
            for _, i, _ in gains[:best_k_total]:
                ks[i] += 1
            step = batch_cost(b + best_k_total)
            bad = {i for i in range(b) if ks[i] > 0
                   and expected_tokens(alphas[i], ks[i]) * plain / step < 1 + self.margin}
            if not bad:
                return {r: ks[i] for i, r in enumerate(req_ids)}
            eligible -= bad
