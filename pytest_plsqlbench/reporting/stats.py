"""pass@k and bootstrap confidence intervals: the statistics that let two runs be compared.

* :func:`pass_at_k` is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language
  Models Trained on Code", eq. 1): with ``n`` samples of a task of which ``c`` pass,
  ``pass@k = 1 - C(n-c, k) / C(n, k)`` -- the chance that at least one of ``k`` samples drawn
  without replacement passes. Computed with exact integers, so it is exact for any ``n``.
* :func:`bootstrap_cis` gives percentile-bootstrap intervals over *tasks*: tasks are the unit the
  paper averages over, so resampling them shows how much a score depends on which tasks happen to
  be in the set. The generator is seeded (:data:`BOOTSTRAP_SEED`) and values are sorted by task id
  by the caller, so the same tasks always give the same interval -- in particular a merged run and
  the unsharded run agree to the last digit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

#: Resamples per interval: 1000 keeps the percentile estimates within about +-1 point for the
#: subset sizes of PLSQLBench while taking well under a second per subset in pure Python.
BOOTSTRAP_RESAMPLES = 1000
#: Fixed seed: intervals are reproducible and identical across shards/merges of a run.
BOOTSTRAP_SEED = 20210707
CONFIDENCE = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021)."""
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean(values: Sequence[float]) -> float | None:
    """Mean with exact float summation (the same values give the same mean in any grouping)."""
    return math.fsum(values) / len(values) if values else None


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on sorted input."""
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def bootstrap_cis(
    columns: Mapping[str, Sequence[float]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> dict[str, tuple[float, float]]:
    """Percentile-bootstrap interval of the mean of each column, resampling rows (tasks).

    All columns must have the same length (one value per task). The same resampled task sets are
    used for every column (a paired bootstrap), so the intervals of one run are mutually
    consistent. Returns ``{}`` when there are no rows.
    """
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"bootstrap columns differ in length: {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    if n == 0:
        return {}
    rng = random.Random(seed)
    rows = range(n)
    means: dict[str, list[float]] = {name: [] for name in columns}
    data = {name: list(values) for name, values in columns.items()}
    for _ in range(resamples):
        picks = rng.choices(rows, k=n)
        for name, values in data.items():
            means[name].append(math.fsum(map(values.__getitem__, picks)) / n)
    tail = (1.0 - confidence) / 2
    out = {}
    for name, dist in means.items():
        dist.sort()
        out[name] = (_percentile(dist, tail), _percentile(dist, 1.0 - tail))
    return out
