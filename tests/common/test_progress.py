"""Progress in a log (non-TTY): plain lines, no carriage returns or cursor codes, at a bounded rate (a fake clock,
never the wall clock); seed workers' progress forwarded to the parent, one line per seed."""

import queue

import pytest

from iclr25.common import progress as pg


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_line_has_count_elapsed_and_eta():
    line = pg.progress_line("seed 3", "train", 120, 480, 40.0)
    assert line == "[seed 3] train 120/480 (25%) · 0:40 elapsed · ETA 2:00"
    assert pg.progress_line("", "score", 0, None, 5.0) == "score 0 · 0:05 elapsed · ETA ?"
    assert pg.fmt_duration(3725) == "1:02:05" and pg.fmt_duration(float("nan")) == "?"
    assert pg.eta_seconds(0, 10, 3.0) is None and pg.eta_seconds(5, 10, 3.0) == 3.0


def test_plain_lines_are_rate_bounded_per_seed_and_carry_no_cursor_codes():
    lines: list[str] = []
    clock = FakeClock()
    b = pg.PlainProgress(lines.append, interval=10.0, clock=clock)
    # two seeds, 1000 updates each over 100 fake seconds (10 updates per second per seed)
    for k in range(1000):
        clock.t = k * 0.1
        b.update("seed 0", "train", k, 1000)
        b.update("seed 1", "train", k, 1000)
    b.finish("seed 0")
    b.finish("seed 1")
    for key in ("seed 0", "seed 1"):
        mine = [ln for ln in lines if ln.startswith(f"[{key}]")]
        assert 2 <= len(mine) <= 2 + 100 / 10  # first line, one per interval, the closing one
        assert mine[-1] == f"[{key}] done in 1:40"
    assert not any(c in ln for ln in lines for c in ("\r", "\x1b"))
    # the line after 50 fake seconds: count, elapsed and the ETA at the rate so far
    assert "[seed 0] train 500/1000 (50%) · 0:50 elapsed · ETA 0:50" in lines


def test_a_new_loop_restarts_elapsed_and_eta():
    lines: list[str] = []
    clock = FakeClock()
    b = pg.PlainProgress(lines.append, interval=0.0, clock=clock)
    b.update("seed 0", "pretrain", 0, 10)
    clock.t = 100.0
    b.update("seed 0", "finetune", 0, 4)  # a second loop of the same seed
    clock.t = 110.0
    b.update("seed 0", "finetune", 1, 4)
    assert lines[-1] == "[seed 0] finetune 1/4 (25%) · 0:10 elapsed · ETA 0:30"


def test_interval_is_validated():
    with pytest.raises(ValueError, match="interval"):
        pg.PlainProgress(print, interval=-1)


def test_worker_progress_is_forwarded_with_its_seed(monkeypatch):
    q: queue.Queue = queue.Queue()
    monkeypatch.setattr(pg, "FORWARD_INTERVAL_S", 0.0)
    pg.set_forward(q)
    pg.set_task("seed 4")
    try:
        assert list(pg.progress(range(3), desc="train")) == [0, 1, 2]
        pg.task_done("seed 4")
    finally:
        pg.set_forward(None)
        pg.set_task("")
    msgs = []
    while not q.empty():
        msgs.append(q.get())
    assert msgs[0] == ("update", "seed 4", "train", 0, 3)
    assert msgs[-2] == ("update", "seed 4", "train", 3, 3)
    assert msgs[-1] == ("done", "seed 4", "done")


def test_parent_draws_forwarded_messages_one_line_per_seed():
    from iclr25.harness.workers import draw_forwarded

    lines: list[str] = []
    clock = FakeClock()
    b = pg.PlainProgress(lines.append, interval=30.0, clock=clock)
    q: queue.Queue = queue.Queue()
    for m in [
        ("update", "seed 0", "train", 0, 10),
        ("update", "seed 1", "train", 0, 10),
        ("update", "seed 0", "train", 5, 10),  # within the interval: not drawn
        ("done", "seed 0", "done"),
        None,
    ]:
        q.put(m)
    draw_forwarded(q, b)
    assert lines == [
        "[seed 0] train 0/10 (0%) · 0:00 elapsed · ETA ?",
        "[seed 1] train 0/10 (0%) · 0:00 elapsed · ETA ?",
        "[seed 0] done in 0:00",
    ]


def test_quiet_draws_nothing(monkeypatch, capsys):
    monkeypatch.setattr(pg, "_QUIET", True)
    monkeypatch.setattr(pg, "_stderr_is_tty", lambda: False)
    assert list(pg.progress(range(5), desc="x")) == list(range(5))
    pg.log("hello")
    assert capsys.readouterr().err == ""


def test_non_tty_progress_writes_plain_lines(monkeypatch, capsys):
    monkeypatch.setattr(pg, "_QUIET", False)
    monkeypatch.setattr(pg, "_stderr_is_tty", lambda: False)
    monkeypatch.setattr(pg, "_LOG_BOARD", None)
    assert list(pg.progress(range(5), desc="score")) == list(range(5))
    err = capsys.readouterr().err
    assert "score 0/5 (0%)" in err and "\r" not in err and "\x1b" not in err


def test_tty_board_keeps_one_bar_per_running_seed_at_its_own_position():
    import io

    f = io.StringIO()
    b = pg.TtyProgress(file=f)
    b.update("seed 0", "train", 3, 10)
    b.update("seed 1", "train", 1, 10)
    assert b._slots == {"seed 0": 0, "seed 1": 1}
    assert b._bars["seed 0"][0].n == 3 and b._bars["seed 0"][0].total == 10
    b.finish("seed 0")
    b.update("seed 2", "train", 0, 10)  # takes the freed line
    assert b._slots == {"seed 1": 1, "seed 2": 0}
    b.close()
    assert b._bars == {} and "seed 1 train" in f.getvalue()
