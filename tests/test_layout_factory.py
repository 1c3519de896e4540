"""``package.module:factory`` layouts: tensor order checked against a real backward pass."""
import pytest
from cli_helpers import need_module

torch = need_module("torch")

from autotuner.model.layout import LayoutError  # noqa: E402
from autotuner.readers.layouts import load_layout  # noqa: E402


@pytest.fixture(autouse=True)
def _tests_on_path(monkeypatch):
    import pathlib

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).parent))


def _hook_order(module, x):
    """Names in the order autograd accumulates their gradients (what Horovod's hooks see)."""
    got = []
    handles = [p.register_post_accumulate_grad_hook(lambda _p, n=n: got.append(n))
               for n, p in module.named_parameters()]
    module(x).sum().backward()
    for h in handles:
        h.remove()
    return got


def test_factory_layout_order_is_the_real_backward_order():
    import factory_models

    layout = load_layout("factory_models:small_cnn")
    real = _hook_order(factory_models.small_cnn(), factory_models.small_cnn_input())
    assert list(layout.names) == real
    assert layout.n_params == sum(p.numel() for p in factory_models.small_cnn().parameters())
    assert abs(sum(layout.compute_share) - 1.0) < 1e-9


def test_tied_weights_count_once():
    import factory_models

    layout = load_layout("factory_models:tied")
    assert sorted(layout.names) == sorted(n for n, _ in factory_models.tied().named_parameters())
    assert layout.n_params == 10 * 4 + 4 + 4


@pytest.mark.parametrize("spec, msg", [
    ("factory_models:frozen_only", "without trainable parameters"),
    ("factory_models:broken", "failed: RuntimeError: cannot build"),
    ("factory_models:missing", "cannot import model factory"),
    ("no_such_module_xyz:f", "cannot import model factory"),
])
def test_factory_errors_are_one_line(spec, msg):
    with pytest.raises(LayoutError, match=msg) as e:
        load_layout(spec)
    assert "\n" not in str(e.value)
