"""shardwise.mxfp8 against the C++ codec as `shardwise convert` runs it: the same random tensors
(NaN, +-inf, subnormals, zero blocks, partial last blocks) quantized in Python and by the CLI must
give identical bytes, for both scale rules and both scale layouts; dequantization must match
`convert --to bf16` bit for bit."""

import pathlib
import sys

import numpy as np
import pytest
import torch

import shardwise
from shardwise import mxfp8

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import safetensors_container as container  # noqa: E402 (tests/, an independent writer/reader)

ST_DTYPES = {"F32": (np.float32, torch.float32), "F16": (np.float16, torch.float16),
             "BF16": (np.uint16, torch.bfloat16), "F8_E4M3": (np.uint8, None),
             "F8_E8M0": (np.uint8, None), "U8": (np.uint8, None)}
ST_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor (fp32, fp16 or bf16)."""
    container.write(path, {
        name: (ST_NAMES[t.dtype], t.shape,
               (t.contiguous().view(torch.uint8) if t.dtype == torch.bfloat16
                else t.contiguous()).numpy().tobytes())
        for name, t in tensors.items()})


def read_safetensors(path):
    """name -> (safetensors dtype, numpy array of the raw elements)."""
    tensors, _ = container.read(path)
    return {name: (dtype, np.frombuffer(raw, dtype=ST_DTYPES[dtype][0]).reshape(shape))
            for name, (dtype, shape, raw) in tensors.items()}


def nasty_tensor(rows, cols, seed):
    """fp32 values over the whole range: normals of many magnitudes, subnormals, zeros, NaN,
    +-inf, whole zero blocks and whole subnormal blocks."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x *= np.exp2(rng.integers(-30, 30, size=(rows, 1))).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    pick = lambda k: rng.choice(n, size=max(1, n // k), replace=False)
    flat[pick(50)] = np.float32(np.nan)
    flat[pick(60)] = np.float32(np.inf)
    flat[pick(60)] = -np.float32(np.inf)
    flat[pick(20)] = 0.0
    flat[pick(15)] = (rng.standard_normal(n // 15 or 1) * 1e-39).astype(np.float32)  # subnormal
    if cols >= 64:
        x[0, :32] = 0.0
        x[-1, 32:64] = (rng.standard_normal(32) * 1e-40).astype(np.float32)
    x[rows // 2, :] *= np.float32(2.0 ** 100)  # huge rows (overflow to inf in fp16/bf16 casts)
    return torch.from_numpy(x)


SHAPES = [(7, 100), (130, 64), (3, 32), (129, 161)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_quantize_and_dequantize_match_the_convert_cli(cli, tmp_path, dtype):
    tensors = {f"w{i}": nasty_tensor(r, c, seed=i).to(dtype) for i, (r, c) in enumerate(SHAPES)}
    src = tmp_path / "in.safetensors"
    write_safetensors(src, tensors)
    for rule in ("ceil", "floor"):
        for layout in ("2d", "swizzled"):
            out = tmp_path / f"q-{rule}-{layout}.safetensors"
            cli("convert", "--to", "mxfp8", src, out, "--scale-rule", rule,
                "--scale-layout", layout)
            converted = read_safetensors(out)
            for name, t in tensors.items():
                data, scale = mxfp8.quantize(t, scale_rule=rule, scale_layout=layout)
                assert data.dtype == torch.uint8 and scale.dtype == torch.uint8
                assert converted[name][0] == "F8_E4M3"
                np.testing.assert_array_equal(data.numpy(), converted[name][1], err_msg=name)
                np.testing.assert_array_equal(scale.numpy(), converted[name + "_scale"][1],
                                              err_msg=f"{name} {rule} {layout}")
            back = tmp_path / f"d-{rule}-{layout}.safetensors"
            cli("convert", "--to", "bf16", out, back)
            restored = read_safetensors(back)
            for name in tensors:
                data = torch.from_numpy(converted[name][1].copy())
                scale = torch.from_numpy(converted[name + "_scale"][1].copy())
                ours = mxfp8.dequantize(data, scale, torch.bfloat16, scale_layout=layout)
                np.testing.assert_array_equal(ours.view(torch.int16).numpy().view(np.uint16),
                                              restored[name][1], err_msg=name)


def test_numpy_inputs_give_numpy_results_equal_to_torch():
    x = nasty_tensor(5, 70, seed=7)
    d_t, s_t = mxfp8.quantize(x)
    d_n, s_n = mxfp8.quantize(x.numpy())
    assert isinstance(d_n, np.ndarray) and s_n.shape == (5, 3)
    np.testing.assert_array_equal(d_t.numpy(), d_n)
    np.testing.assert_array_equal(s_t.numpy(), s_n)
    y = mxfp8.dequantize(d_n, s_n, np.float32)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_array_equal(y, mxfp8.dequantize(d_t, s_t, torch.float32).numpy())
    # Finite values come back within E4M3's precision (3 mantissa bits: 2^-4 relative), except
    # those below the block's smallest representable magnitude.
    finite = np.isfinite(x.numpy()) & (np.abs(x.numpy()) > 1e-30)
    big = np.abs(x.numpy()) > np.abs(np.where(np.isfinite(x.numpy()), x.numpy(), 0)).max(
        axis=1, keepdims=True) * 2.0 ** -6
    sel = finite & big
    rel = np.abs(y[sel] - x.numpy()[sel]) / np.abs(x.numpy()[sel])
    assert rel.max() <= 2.0 ** -4
    assert np.isnan(y[~np.isfinite(x.numpy())]).all()  # NaN and inf come back as NaN


def test_leading_dims_fold_into_rows():
    x = torch.randn(2, 3, 64)
    data, scale = mxfp8.quantize(x)
    assert data.shape == (2, 3, 64) and scale.shape == (2, 3, 2)
    flat_d, flat_s = mxfp8.quantize(x.reshape(6, 64))
    assert torch.equal(data.reshape(6, 64), flat_d) and torch.equal(scale.reshape(6, 2), flat_s)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="scale_rule"):
        mxfp8.quantize(torch.zeros(2, 32), scale_rule="round")
    with pytest.raises(ValueError, match="float64"):
        mxfp8.quantize(np.zeros((2, 32)))
    with pytest.raises(ValueError, match="empty"):
        mxfp8.quantize(torch.zeros(0, 32))
    d, s = mxfp8.quantize(torch.ones(4, 64))
    with pytest.raises(ValueError, match="scale: shape"):
        mxfp8.dequantize(d, s[:, :1], torch.float32)
    with pytest.raises(ValueError, match="must be uint8"):
        mxfp8.dequantize(d.float(), s, torch.float32)


def test_newton_schulz_orthogonalises():
    g = torch.randn(48, 96, generator=torch.Generator().manual_seed(0))
    for coefficients in ("quintic", "simple", "polar_express"):
        x = shardwise.newton_schulz(g, steps=8, coefficients=coefficients)
        assert x.shape == g.shape and x.dtype == torch.float32
        s = torch.linalg.svdvals(x)
        assert s.min() > 0.5 and s.max() < 1.5, (coefficients, s.min(), s.max())
    # Same result for numpy input; the polar factor of a tall matrix is the transpose's.
    np.testing.assert_allclose(shardwise.newton_schulz(g.numpy()), shardwise.newton_schulz(g), 0, 0)
    np.testing.assert_allclose(shardwise.newton_schulz(g.T).numpy(),
                               shardwise.newton_schulz(g).T.numpy(), atol=1e-5)
    with pytest.raises(shardwise.Error, match="2-D"):
        shardwise.newton_schulz(torch.randn(3, 4, 5))


def reference_newton_schulz(g, steps, abc=(3.4445, -4.7750, 2.0315)):
    """Keller Jordan's quintic iteration in float64 torch, on the short side."""
    x = g.double()
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    a, b, c = abc
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.T if tall else x).float()


@pytest.mark.parametrize("shape", [(32, 80), (90, 24)])
def test_newton_schulz_simple_matches_reference(shape):
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    ours = shardwise.newton_schulz(g, steps=5, coefficients="simple")
    torch.testing.assert_close(ours, reference_newton_schulz(g, 5), atol=2e-5, rtol=0)
