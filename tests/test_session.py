"""A study's calls are logged: one line each in calls.jsonl, with the call's Snakemake log kept beside the jobs'."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
import yaml

from compile_study.core.calls import session


@pytest.mark.unit
def test_each_call_is_one_line_with_its_status_and_snakemake_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "results" / "cuda"
    log_dir = tmp_path / ".snakemake" / "log"
    log_dir.mkdir(parents=True)
    stale = log_dir / "2026-01-01T000000.000000.snakemake.log"
    stale.write_text("an older call")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    write_log = f"open('.snakemake/log/2026-11-30T000000.000000.snakemake.log', 'w').write('{'this call'}')"
    assert session.main([str(study), "--", sys.executable, "-c", write_log]) == 0
    assert session.main([str(study), "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    first, second = (json.loads(line) for line in (study / "calls.jsonl").read_text().splitlines())
    assert (first["call"], first["exit_status"], second["call"], second["exit_status"]) == (1, 0, 2, 3)
    assert first["command"][-1] == write_log and first["wall_s"] >= 0 and first["git_commit"]
    assert first["snakemake_log"] == "calls/1.snakemake.log"  # this call's log, not the stale one
    assert (tmp_path / "logs/cuda/calls/1.snakemake.log").read_text() == "this call"
    assert "snakemake_log" not in second  # that call wrote no Snakemake log


@pytest.mark.unit
def test_a_config_file_that_is_no_mapping_stops_the_call_before_its_command_naming_the_file(tmp_path, monkeypatch,
                                                                                              capsys):
    """Snakemake's own message ("Config file must be given as JSON or YAML with keys at top level") names no file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "list.yaml").write_text("- data\n")
    (tmp_path / "good.yaml").write_text("device: cpu\n")
    ran = "open('ran', 'w')"
    command = [sys.executable, "-c", ran, "--cores", "1", "--configfile", "good.yaml", "empty.yaml",
               "--configfile=list.yaml", "-n"]
    assert session.configfiles(command) == ["good.yaml", "empty.yaml", "list.yaml"]
    assert session.main([str(tmp_path / "results/cpu"), "--", *command]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "config file empty.yaml: it is empty; a config file maps keys to values (data:, model:, grids:, ...)",
        "config file list.yaml: it holds a list, not a mapping of keys at the top level (data:, model:, grids:, ...)"]
    assert not (tmp_path / "ran").exists() and not (tmp_path / "results/cpu/calls.jsonl").exists()


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_a_call_stopped_by_a_time_limit_is_logged_with_the_signal_and_its_commands_exit(tmp_path):
    """A time limit (`timeout`) sends SIGTERM to the session: the session passes it on, waits for the command to
    end and logs the call; the command here ends by the signal's default action. The test sends the SIGTERM
    itself once the command runs (as `timeout` does at its limit): a fixed limit raced the session's start on
    a host that other test processes kept busy."""
    import signal
    import subprocess

    study, started = tmp_path / "results" / "cuda", tmp_path / "started"
    sleeper = f"import time; open({str(started)!r}, 'w'); time.sleep(60)"
    began = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "compile_study", "session", str(study), "--",
                             sys.executable, "-c", sleeper], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ | {"PYTHONPATH": str(session.env.CODE)})
    while not started.exists() and proc.poll() is None and time.time() - began < 120:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0 and time.time() - began < 120, out  # it exits with the command's failure
    (line,) = (json.loads(x) for x in (study / "calls.jsonl").read_text().splitlines())
    assert line["stopped_by"] == "SIGTERM" and line["exit_status"] == -15 and 0 < line["wall_s"] < 120


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_the_sessions_own_time_limit_tells_the_command_when_and_stops_it_there(tmp_path, monkeypatch):
    """--time-limit: the command gets the limit's end (core/calls/deadline.py) and a SIGTERM when it comes."""
    from compile_study.core.calls import deadline

    monkeypatch.chdir(tmp_path)
    study, seen = tmp_path / "results" / "cuda", tmp_path / "seen"
    sleeper = f"import os, time; open({str(seen)!r}, 'w').write(os.environ[{deadline.VAR!r}]); time.sleep(60)"
    began = time.time()
    rc = session.main(["--time-limit", "3", str(study), "--", sys.executable, "-c", sleeper])
    assert rc == -15 and time.time() - began < 30
    assert float(seen.read_text()) == pytest.approx(began + 3, abs=1.0)
    (line,) = (json.loads(x) for x in (study / "calls.jsonl").read_text().splitlines())
    assert line["stopped_by"] == "time limit" and line["time_limit_s"] == 3 and 2.5 < line["wall_s"] < 30
    assert session.main(["--time-limit", "3", str(study), "--", sys.executable, "-c", "pass"]) == 0
    assert "stopped_by" not in json.loads((study / "calls.jsonl").read_text().splitlines()[-1])  # ended in time
    with pytest.raises(SystemExit):
        session.main([str(study), "--time-limit", "3", "--", "true"])  # swallowed into the command: refused
    with pytest.raises(SystemExit):
        session.main(["--time-limit", "0", str(study), "--", "true"])


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_a_command_still_running_when_the_grace_ends_is_killed_with_all_it_started_and_the_call_is_logged(
        tmp_path, monkeypatch):
    """--grace: a job that outlives the time limit's SIGTERM (Snakemake lets its running jobs finish) is cut
    `grace` seconds later, the command's whole process group with it, so a host's hard command limit never
    finds the session still waiting and the call is booked."""
    from .conftest import alive

    monkeypatch.chdir(tmp_path)
    study, pids = tmp_path / "results" / "cuda", tmp_path / "pids"
    stubborn = ("import os, signal, subprocess, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"  # finishing its job, as Snakemake does
                "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
                f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
                "time.sleep(120)\n")
    began = time.time()
    rc = session.main(["--time-limit", "2", "--grace", "1.5", str(study), "--", sys.executable, "-c", stubborn])
    assert rc == -9 and time.time() - began < 30
    command_pid, child_pid = map(int, pids.read_text().split())
    deadline = time.time() + 10
    while alive(child_pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(command_pid) and not alive(child_pid)  # the job's own process too, not only the command
    (line,) = (json.loads(x) for x in (study / "calls.jsonl").read_text().splitlines())
    assert (line["stopped_by"], line["time_limit_s"], line["grace_s"], line["exit_status"]) == ("time limit", 2, 1.5, -9)
    assert 3.4 <= line["killed_after_s"] <= line["wall_s"] < 30
    # a command that ends within the grace is not killed, and the call says nothing of a kill
    assert session.main(["--time-limit", "1", "--grace", "20", str(study), "--", sys.executable, "-c",
                         "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); "
                         "time.sleep(60)"]) == 0
    last = json.loads((study / "calls.jsonl").read_text().splitlines()[-1])
    assert last["stopped_by"] == "time limit" and last["grace_s"] == 20 and "killed_after_s" not in last
    assert last["wall_s"] < 15


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_with_a_grace_the_sessions_interrupt_reaches_the_command_in_its_own_process_group(tmp_path):
    """Under --grace the command runs in a process group of its own, which the terminal's ^C no longer reaches:
    the session passes the SIGINT on, the command stops and the call is logged with it."""
    import signal
    import subprocess

    from .conftest import interruptible

    study, started = tmp_path / "results" / "cuda", tmp_path / "started"
    sleeper = f"import time; open({str(started)!r}, 'w'); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-m", "compile_study", "session", "--time-limit", "60", "--grace", "5",
                             str(study), "--", sys.executable, "-c", sleeper], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ | {"PYTHONPATH": str(session.env.CODE)},
                            preexec_fn=interruptible)  # a session started with SIGINT ignored would pass that on
    began = time.time()
    while not started.exists() and proc.poll() is None and time.time() - began < 120:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # the session alone, as a terminal would reach it; the command is elsewhere
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0 and "KeyboardInterrupt" in out, out  # the command's ^C, its exit status the session's
    (line,) = (json.loads(x) for x in (study / "calls.jsonl").read_text().splitlines())
    assert (line["stopped_by"], line["exit_status"]) == ("SIGINT", -2) and "killed_after_s" not in line
    assert line["wall_s"] < 60


@pytest.mark.unit
def test_a_grace_needs_a_time_limit_and_comes_before_the_study(tmp_path, capsys):
    study = str(tmp_path / "results" / "cuda")
    for argv in (["--grace", "5", study, "--", "true"], ["--time-limit", "9", "--grace", "-1", study, "--", "true"]):
        with pytest.raises(SystemExit):
            session.main(argv)
        assert "it needs --time-limit and a number of seconds >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        session.main(["--time-limit", "9", study, "--grace", "5", "--", "true"])
    assert "put --grace before the study's directory" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


@pytest.mark.unit
def test_a_run_that_would_not_end_before_the_calls_time_limit_is_not_started(tmp_path, monkeypatch):
    from compile_study.core.calls import deadline
    from compile_study.measure import jobs

    record = tmp_path / "r0.json"
    monkeypatch.setenv(deadline.VAR, str(time.time() + 30))
    with pytest.raises(deadline.PastDeadline, match=r"r0.json: not started: it takes about 120 s .* comes in (29|30) s"):
        jobs.train_run({}, str(tmp_path), str(record), str(tmp_path / "r0.trace.json.gz"), str(tmp_path / "log"), 1,
                       expected_s=lambda: 120.0)
    assert not record.exists() and not (tmp_path / "log").exists()  # nothing launched, nothing written
    deadline.check(10.0, "a run that fits")  # nothing raised
    monkeypatch.delenv(deadline.VAR)
    assert deadline.seconds_left() is None
    deadline.check(1e9, "a call without a time limit")  # nothing changes


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_a_test_tier_is_kept_with_its_counts_versions_and_commit_and_read_into_the_readme(tmp_path):
    """`pytest --tier-record PATH` keeps a session's outcome; the study README quotes it in one line."""
    import json
    import subprocess
    import sys

    from compile_study.report.docs import readme

    from .conftest import REPO

    kept = tmp_path / "tests" / "unit.json"
    tests = ["tests/test_model.py::test_bad_head_count_is_rejected", "tests/test_model.py::test_default_is_four_layers_four_heads"]
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-m", "unit", *tests,
                    "--tier-record", str(kept)], cwd=REPO, check=True, capture_output=True)
    t = json.loads(kept.read_text())
    assert (t["tier"], t["passed"], t["failed"], t["skipped"], t["error"], t["workers"]) == ("unit", 2, 0, 0, 0, 2)
    assert t["torch"] and t["device_type"] in ("cpu", "cuda") and len(t["git_commit"]) == 40 and t["wall_s"] > 0
    line = readme.test_line(t)
    assert line.startswith("`-m unit`: 2 passed, 0 failed, 0 skipped, 0 errors in ") and t["git_commit"][:12] in line
    assert t["interrupted"] is False and t["not_passed"] == [] and t["skipped_why"] == {}
    assert sorted(n for n, _ in t["slowest"]) == sorted(tests) and all(sec >= 0 for _, sec in t["slowest"])


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_a_test_session_stopped_by_a_time_limit_is_kept_as_interrupted(tmp_path):
    """A time limit's ^C (`timeout -s INT`) stops pytest gracefully: the record keeps the tests that ran and
    says that the session was cut."""
    import signal
    import subprocess

    from compile_study.report.docs import readme

    from .conftest import REPO, interruptible

    kept, probe, started = tmp_path / "all.json", tmp_path / "test_probe.py", tmp_path / "started"
    probe.write_text("import time\n\nimport pytest\n\npytestmark = pytest.mark.unit\n\n\ndef test_quick():\n    pass\n\n\n"
                     "def test_fails():\n    assert 1 == 2\n\n\n"
                     "def test_skipped():\n    pytest.skip('no widget on this host')\n\n\n"
                     f"def test_slow():\n    open({str(started)!r}, 'w').close()\n    time.sleep(60)\n")
    # one process (-n 0): test_quick is then reported before test_slow starts (a worker reports asynchronously)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--rootdir", str(REPO),
                             "-c", str(REPO / "pyproject.toml"), "-p", "tests.conftest", str(probe),
                             "--tier-record", str(kept)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=interruptible)
    deadline = time.time() + 120
    while not started.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=60)[0]
    t = json.loads(kept.read_text())
    assert proc.returncode == pytest.ExitCode.INTERRUPTED and t["interrupted"] is True and t["passed"] == 1, out[-2000:]
    assert t["workers"] is None and t["tier"] == "all" and t["failed"] == 1
    assert [n.split("::")[-1] for n in t["not_passed"]] == ["test_fails"]  # the failing test by name
    assert readme.test_line(t).startswith("every tier (`python -m pytest`): 1 passed, 1 failed")
    assert t["skipped"] == 1 and t["skipped_why"] == {"no widget on this host": 1}  # each reason, counted
    assert readme.test_line(t).endswith("not passed: `" + t["not_passed"][0] + "`; skipped: 1 × no widget on this host")
    assert ", interrupted before its last test in " in readme.test_line(t)


@pytest.mark.dag  # it starts processes: a pytest session, or a command under a time limit
def test_a_group_of_tests_runs_on_one_process_and_its_fixture_once(tmp_path):
    """`xdist_group` keeps a module's tests on one process, so that a fixture that runs a study once (SLURM, the
    MLP claim) runs once; a pytest that made pytest-xdist ignore the group (9.2.0) had two SLURM studies cancel
    each other's jobs. With the pinned versions the group holds; tests/conftest.py fails such tests otherwise."""
    import subprocess

    probe, seen = tmp_path / "test_group_probe.py", tmp_path / "seen"
    seen.mkdir()
    probe.write_text(
        "import os\nfrom pathlib import Path\n\nimport pytest\n\n"
        "pytestmark = pytest.mark.xdist_group('probe')\n\n\n"
        "@pytest.fixture(scope='module')\ndef once():\n"
        f"    (Path({str(seen)!r}) / os.environ['PYTEST_XDIST_WORKER']).touch()\n\n\n"
        + "".join(f"def test_{i}(once):\n    pass\n\n\n" for i in range(4)))
    # the installed pytest and pytest-xdist alone (no project conftest: its processes would import torch)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path), "-c", os.devnull, str(probe)], cwd=tmp_path, capture_output=True,
                         text=True)
    assert res.returncode == 0 and "4 passed" in res.stdout, res.stdout[-2000:]
    assert len(list(seen.iterdir())) == 1  # one process ran all four, and the module fixture once


@pytest.mark.unit
def test_the_command_is_told_which_call_it_runs_in_before_the_call_is_logged(tmp_path, monkeypatch):
    """The H100 grid's paper, made in its fourth call, said "the study ran in three calls, three ending with an
    error": the session logs a call when its command ends, after the paper rule ran in it."""
    monkeypatch.chdir(tmp_path)
    study, seen = tmp_path / "results" / "cuda", tmp_path / "seen.txt"
    tell = f"import os; open({str(seen)!r}, 'a').write(os.environ[{session.CALL!r}] + '\\n')"
    for _ in range(2):
        assert session.main([str(study), "--", sys.executable, "-c", tell]) == 0
    assert seen.read_text().splitlines() == [f"{study.resolve()}\t1", f"{study.resolve()}\t2"]
    monkeypatch.setenv(session.CALL, f"{study.resolve()}\t3")
    assert session.call_in_progress("results/cuda") == 3 and session.call_in_progress(tmp_path / "other") is None
    monkeypatch.delenv(session.CALL)
    assert session.call_in_progress(study) is None


@pytest.mark.unit
def test_a_paper_and_readme_made_during_a_call_count_only_the_logged_calls_and_say_theirs_is_not(tmp_path, monkeypatch):
    from compile_study.measure.checks.spec import method_checks
    from compile_study.report import build
    from compile_study.report.docs import readme

    from .conftest import REPO

    stored = REPO / "reference" / "h200-full-2026-12-03"  # three logged calls
    inputs = {k: str(stored / f) for k, f in (("summary", "summary.csv"), ("parity", "parity.csv"), ("claims", "claims.csv"),
              ("decisions", "decisions.json"), ("environment", "environment.json"), ("facts", "facts.json"),
              ("figures", "figures"), ("calls", "calls.jsonl"))}
    inputs |= {n: str(stored / f"checks/{n}.json") for n in method_checks() if (stored / f"checks/{n}.json").is_file()}
    config = yaml.safe_load((stored / "config.yaml").read_text())
    study = tmp_path / "study"
    study.mkdir()
    monkeypatch.setenv(session.CALL, f"{study.resolve()}\t4")
    build.write(inputs, config, "cuda", study / "paper.md", study / "paper.tex")
    md = (study / "paper.md").read_text()
    assert "Before this paper's call, the study ran in three calls" in md
    assert "This paper was made during call 4, which ends after it and is not yet logged." in md
    monkeypatch.setenv(session.CALL, f"{(tmp_path / 'another').resolve()}\t4")  # a call of another study
    build.write(inputs, config, "cuda", study / "paper.md", study / "paper.tex")
    md = (study / "paper.md").read_text()
    assert "The study ran in three calls" in md and "not yet logged" not in md
    calls = [{"call": 1, "start_utc": "2026-12-06T00:00:00+00:00", "wall_s": 60.0, "exit_status": 1, "gpus": [],
              "host_cpus": 2, "command": ["snakemake"]}]
    assert readme._calls(calls, None, 2)[-1] == "Call 2, which made this README, ends after it and is not yet logged."
    assert readme._calls([], None, 1) == ["Call 1, which made this README, ends after it and is not yet logged."]
    assert "not yet logged" not in " ".join(readme._calls(calls))
