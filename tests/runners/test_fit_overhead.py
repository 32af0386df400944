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
    print("fit_overhead ok")


if __name__ == "__main__":
    main()
