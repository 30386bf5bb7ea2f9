"""Wall time of exact Shapley values and the error of permutation-sampled Shapley vs budget.

Target: exact Shapley for 12 players in <= 1 s on 2 CPU threads.
Run: .venv/bin/python benchmarks/shapley_speed.py
"""
import time

import torch

from labkit.core.games import _shapley_matrix, exact_shapley, sampled_shapley

torch.set_num_threads(2)


def best_of(fn, repeats=5):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    gen = torch.Generator().manual_seed(0)
    print("exact_shapley, one game (first call builds the cached weight matrix)")
    print(f"{'n':>3} {'coalitions':>11} {'first call s':>13} {'warm s':>10}")
    for n in range(4, 15):
        v = torch.randn(2 ** n, generator=gen, dtype=torch.float64)
        _shapley_matrix.cache_clear()
        t0 = time.perf_counter()
        exact_shapley(v)
        cold = time.perf_counter() - t0
        warm = best_of(lambda: exact_shapley(v))
        print(f"{n:>3} {2 ** n:>11} {cold:>13.5f} {warm:>10.6f}")
    v = torch.randn(64, 2 ** 10, generator=gen, dtype=torch.float64)
    print(f"batch of 64 games at n = 10: {best_of(lambda: exact_shapley(v)):.5f} s")

    n = 12
    v = torch.randn(2 ** n, generator=gen, dtype=torch.float64)
    exact = exact_shapley(v)
    scale = float(exact.abs().mean())
    print(f"\nsampled_shapley at n = {n} (random game, mean |phi| = {scale:.4f}); error averaged over 5 seeds")
    print(f"{'orderings':>9} {'evaluations':>12} {'max |err|':>10} {'mean |err|':>11} {'time s':>8}")
    for P in (10, 30, 100, 300, 1000, 3000):
        errs_max, errs_mean, evals, secs = [], [], [], []
        for seed in range(5):
            t0 = time.perf_counter()
            phi, e = sampled_shapley(v, n_permutations=P, seed=seed)
            secs.append(time.perf_counter() - t0)
            errs_max.append(float((phi - exact).abs().max()))
            errs_mean.append(float((phi - exact).abs().mean()))
            evals.append(e)
        print(f"{P:>9} {sum(evals) / 5:>12.0f} {sum(errs_max) / 5:>10.4f} {sum(errs_mean) / 5:>11.4f} "
              f"{sum(secs) / 5:>8.4f}")


if __name__ == "__main__":
    main()
