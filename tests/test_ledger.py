"""The ledger counts what emulated device memory is asked to do (hand-counted cases), and the
trainer's steps on the GPU backends allocate, copy and wait for nothing, launch the same few
operations every step and keep every block within a few times as busy as the mean."""
import numpy as np
import pytest
from helpers import random_matrix

from ncae_cuda.model.loop import run_epoch
from ncae_cuda.model.network import Network, Objective
from ncae_cuda.ops import launch_work
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.layout import AdamConfig, NCAELayout
from ncae_cuda.ops.ledger import DeviceNumpy, Ledger, paused, step_begins
from ncae_cuda.ops.plan import Planner, Schedule, trainable_rows


def test_operations_allocations_copies_and_syncs_are_counted():
    xp, ledger = DeviceNumpy(), Ledger()
    with ledger.recording():
        a = xp.zeros(4, np.float32)                    # allocation + fill
        b = xp.asarray(np.arange(4, dtype=np.float32)) # allocation + copy from the host
        step_begins()
        c = a + b                                      # op + allocation
        a += b                                         # op, in place
        view = c[1:3].reshape(2, 1)                    # a view: nothing
        s = c.sum()                                    # op + allocation (a 0-d device array)
        value = float(s)                               # copy + sync
        a[:2] = 0                                      # op (a fill)
        a[np.arange(4)] = np.ones(4, np.float32)       # op + copy from the host
        e = xp.empty_like(a)                           # allocation only
        with paused():
            np.diff(c)                                 # the ledger's own reading: nothing
    setup, step = ledger.steps
    assert setup.ops == ["fill"] and setup.allocations == 2 and setup.copies == 1
    assert step.ops == ["add", "add", "add.reduce", "setitem", "setitem"]
    assert (step.allocations, step.copies, step.syncs) == (3, 2, 1)
    assert value == 6.0 and view.shape == (2, 1) and e.shape == (4,)


def test_what_cupy_refuses_of_a_host_array_the_emulated_device_refuses():
    """On a GPU a numpy array beside a CuPy one is a TypeError, and one written into a plain
    slice of it a ValueError (CuPy fills such a slice from a scalar alone): emulated, numpy took
    both, so code that runs under the emulator failed on its first GPU."""
    xp, host = DeviceNumpy(), np.ones(4, np.float32)
    a = xp.zeros(4, np.float32)
    with pytest.raises(ValueError, match="CuPy refuses it"):
        a[:] = host
    with pytest.raises(ValueError, match="CuPy refuses it"):
        a[1:3] = host[:2]
    for use in (lambda: a + host, lambda: np.multiply(host, a), lambda: a.__iadd__(host),
                lambda: a * np.array(2.0, np.float32),
                lambda: np.add(host, host, out=a), lambda: np.concatenate([a, host]),
                lambda: np.where(a > 0, a, host)):
        with pytest.raises(TypeError, match="CuPy refuses"):
            use()
    # what CuPy takes: scalars (a 0-d host array's value written into a slice too), an
    # advanced index's values, device arrays
    a[:] = 2
    a[:2] = np.array(3, np.float32)
    a[np.array([2, 3])] = host[:2]
    a[[0]] = host[:1]
    b = a * np.float32(2) + xp.asarray(host) + 1
    np.testing.assert_array_equal(xp.to_host(b), [4, 8, 4, 4])


def test_summary_reads_the_steps_after_the_first():
    ledger = Ledger()
    with ledger.recording():
        for step in range(3):
            step_begins()
            ledger.op("k")
            ledger.kernel("gather", 4, 2.5)
            if step == 0:
                ledger.allocation()
            ledger.copy()
        ledger.sync()
    f = ledger.summary()
    assert f["ops_per_step"] == f["ops_per_step_min"] == 2
    assert f["allocations_per_step"] == 0 and f["allocations_first_step"] == 1
    assert f["transfers_per_epoch"] == 2 and f["syncs_per_epoch"] == 1
    assert f["work_balance"] == pytest.approx(1.6) and f["least_balanced_kernel"] == "gather"


def test_summary_reads_slack_and_tail_per_kernel():
    ledger = Ledger()
    with ledger.recording():
        for step in range(2):
            step_begins()
            ledger.kernel("windows", 1, 1, slack=0.5 + step, tail=40 - step, by_entries=True)
            ledger.kernel("dense", 1, 1, slack=0.1, tail=60)      # not sized by entries
            ledger.kernel("adam", 1, 1)                            # not weighed
    f = ledger.summary()
    assert f["parallel_slack"] == 0.5 and f["least_parallel_kernel"] == "windows"
    assert f["parallel_slack_by_kernel"] == {"windows": 0.5}
    assert f["serial_tail"] == 60 and f["longest_tail_kernel"] == "dense"
    assert f["serial_tail_by_kernel"] == {"dense": 60, "windows": 40}


def test_row_windows_are_weighed_by_hand():
    # rows of 10, 1, 0 and 5 entries in windows of 4: row 0 spans windows 0-2 (3 pieces), row
    # 3 windows 2-3 (2 pieces); window 2 may add both rows' pieces, in a read each (UNROLL = 4)
    busiest, mean, tail = launch_work.row_windows_work(np.array([0, 10, 11, 11, 16]), 4)
    assert busiest == 4 + 3 + 2 and mean == (16 + 3 + 2) / 4
    assert tail == 4 + launch_work.ENTRIES_PER_READ * 2
    # a row of 9 entries in windows of 1: 9 pieces, in three reads of up to 4
    assert (launch_work.row_windows_work(np.array([0, 9]), 1)[2]
            == 1 + launch_work.ENTRIES_PER_READ * 3)


def test_adam_is_weighed_with_its_corrections():
    # 1000 elements on 2 blocks of 256 threads: 500 a block, two a thread; the step count, the
    # corrections and the elements, one read each
    busiest, mean, tail = launch_work.adam_work(1000, 2)
    assert busiest == mean == 500
    assert tail == launch_work.ENTRIES_PER_READ * (1 + launch_work.CORRECTIONS_READS + 2)


def test_no_step_is_an_error():
    with pytest.raises(ValueError, match="no step"):
        Ledger().summary()


# ---------------------------------------------------------------------------------------------
# the trainer's steps, counted on the GPU backends (every kernel runs)

@pytest.mark.parametrize("feedback, hidden", [("explicit", (12, 8)), ("implicit", (16,)),
                                              ("explicit", (5, 6, 7))])
def test_a_step_allocates_copies_and_waits_for_nothing(gpu, feedback, hidden):
    rng = np.random.default_rng(0)
    m = random_matrix(rng, 90, 40, density=0.2).tolil()
    m[3, :] = 1.0                                  # one long row among short ones
    m = m.tocsr()
    layout = NCAELayout(40, hidden)
    objective = (Objective.explicit(1.0, 5.0, 1.0, 0.5) if feedback == "explicit"
                 else Objective.implicit())
    weights = rng.random(40) if feedback == "implicit" else None
    with gpu.session():
        net = Network(layout, gpu, objective, layout.xavier_init(rng), weights)
        csr = CSR.from_scipy(gpu, m)
        planner = Planner(csr, trainable_rows(csr), Schedule(0, 16, 0.5))
        net.prepare(planner.geometry)
        adam = AdamConfig(weight_decay=1e-3)
        for epoch in (1, 2):
            ledger = Ledger()
            with ledger.recording():
                loss = run_epoch(lambda b, s: net.train_step(b, s, adam), net.memory, csr,
                                 planner.plan(epoch), "ledger")
            f = ledger.summary()
            assert np.isfinite(loss) and f["steps"] == planner.geometry.steps
            assert f["ops_per_step"] == f["ops_per_step_min"] <= 20, f["ops_of_a_step"]
            assert f["allocations_per_step"] == 0 and f["allocations_first_step"] == 0
            assert f["transfers_per_epoch"] == 1 and f["syncs_per_epoch"] == 1   # the losses
            # a window's block may add two shared segments' pieces, up to a window's entries
            # each (plan.window_sizes): three windows' work at most
            assert f["work_balance"] <= 3, f["work_balance_by_kernel"]
            # one hidden layer: cut, gather, the output layer (2 kernels explicit; 3 products,
            # the error and dc implicit), db1, the scatter, Adam, the loss; then 5 a layer
            one_layer = 8 if feedback == "explicit" else 11
            assert f["ops_per_step"] == one_layer + 5 * (len(hidden) - 1)
