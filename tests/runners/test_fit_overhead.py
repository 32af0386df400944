#!/usr/bin/python3
"""calibrate_cpu.fit_overhead: the step overhead's line a + b tokens through
the one-rank steps' residuals, fitted in relative terms with both terms >= 0.
A noisy long step must not move the intercept the short steps set."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "runners"))
import calibrate_cpu as K  # noqa: E402
import numpy as np  # noqa: E402


def main():
    x = np.array([256, 768, 1024, 1536, 2048], dtype=float)
    step = 1e-3 * (2 + 0.05 * x + 5e-5 * x * x)  # the steps' times, ~5 ms .. 310 ms
    # 1. an exact line is recovered
    a, b = K.fit_overhead(x, 1e-3 + 2e-6 * x, step)
    assert abs(a - 1e-3) < 1e-9 and abs(b - 2e-6) < 1e-12, (a, b)
    # 2. the longest step 3% slow (9 ms at 2K tokens): the intercept stays within 0.5 ms of the truth,
    #    where a two-point fit through 1K and 2K moves it by about the whole 9 ms
    y = 1e-3 + 2e-6 * x
    y[-1] += 0.03 * step[-1]
    a, b = K.fit_overhead(x, y, step)
    assert abs(a - 1e-3) < 0.5e-3, f"one slow long step moved the intercept to {a * 1e3:.2f} ms"
    two = np.linalg.lstsq(np.vstack([np.ones(2), x[[2, 4]]]).T, y[[2, 4]], rcond=None)[0][0]
    assert abs(two - 1e-3) > 5e-3, two  # the old fit's fragility, for the record
    # 3. the signs: a negative intercept refits the slope alone, a negative slope the intercept alone, never clamps
    a, b = K.fit_overhead(x, -0.5e-3 + 4e-6 * x, step)
    assert a == 0.0 and b > 0, (a, b)
    a, b = K.fit_overhead(x, 3e-3 - 1e-7 * x, step)
    assert b == 0.0 and 2e-3 < a < 3e-3, (a, b)
    a, b = K.fit_overhead(x, -1e-3 - 1e-6 * x, step)
    assert (a, b) == (0.0, 0.0), (a, b)
    # 4. bad input is refused with a message
    for bad in ((x, y[:3], step), (x, y, -step), (x, y * np.nan, step), ([], [], [])):
        try:
            K.fit_overhead(*bad)
        except ValueError as e:
            assert "fit_overhead" in str(e)
        else:
            raise AssertionError("bad input accepted")
    # 5. the block's rest a + b t + c t^2 under a, b, c >= 0 (calibrate_cpu.nonneg_lstsq): a fit that is
    #    non-negative free is returned as is; the 2026-12-08 calibration's samples (free fit a = -1.27 ms,
    #    c < 0; clamping a then over-predicted the rest by 17-70%) give a = 0 and stay within 30% of each point.
    t = np.array([256, 512, 1024, 2048], dtype=float)
    A = np.vstack([np.ones_like(t), t, t * t]).T
    exact = 7.8e-4 + 2.3e-6 * t + 2.5e-9 * t * t
    assert np.allclose(K.nonneg_lstsq(A, exact), [7.8e-4, 2.3e-6, 2.5e-9], rtol=1e-6, atol=0)
    rest = np.array([0.00154509, 0.00345437, 0.00896466, 0.01791277])
    a, b, c = K.nonneg_lstsq(A, rest)
    assert a == 0.0 and b > 0 and c >= 0, (a, b, c)
    fit = a + b * t + c * t * t
    assert (np.abs(fit / rest - 1) < 0.3).all(), fit / rest
    clamped = max(0.0, -1.2735e-3) + 1.0224e-5 * t  # the old way
    assert (clamped / rest - 1).max() > 0.5, clamped / rest
    print("fit_overhead ok")


if __name__ == "__main__":
    main()
