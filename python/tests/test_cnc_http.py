"""``keepon-plan cnc`` as a process: the HTTP API end to end on 127.0.0.1 (an ephemeral port), then a restart."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from cnc_support import MAC, TOPOLOGY, join_body, leave_body, new_cnc, sid

ROOT = Path(__file__).resolve().parents[1]
A, B = sid("t1", 1), sid("t2", 1)
DEADLINE_S = 30


class Service:
    def __init__(self, args: list[str]) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "keepon_plan.cli", "cnc", *args, "--listen", "127.0.0.1:0"],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        end = time.monotonic() + DEADLINE_S
        assert self.proc.stderr is not None
        while time.monotonic() < end:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                return
        self.stop()
        raise AssertionError("the CNC did not start: " + "".join(self.lines))

    def call(self, method: str, path: str, body: object = None, raw: bytes | None = None) -> tuple[int, dict]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/yang-data+json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            _out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        return "".join(self.lines) + (err or "")


def _error(doc: dict) -> dict:
    (err,) = doc["ietf-restconf:errors"]["error"]
    return err


def test_the_api_end_to_end_and_a_restart(tmp_path):
    topo = tmp_path / "net.toml"
    topo.write_text(TOPOLOGY, encoding="utf-8")
    db = str(tmp_path / "cnc.db")
    stations = [a for name, mac in MAC.items() for a in ("--station", f"{name}={mac}")]
    svc = Service([str(topo), "--db", db, "--cycle", "1ms", *stations])
    try:
        code, doc = svc.call(
            "POST", "/restconf/operations/keepon-cnc:join", join_body(A, "t1", latest_transmit_offset=0)
        )
        assert code == 200, doc
        out = doc["keepon-cnc:output"]
        assert out["stream-id"] == A and out["keepon-cnc:state"] == "in-force"
        assert out["interface-configuration"]["interface-list"][0]["config-list"][0]["time-aware-offset"] == 0
        assert out["keepon-cnc:routes"] == [["t1", "sw1", "sw2", "l1"]]

        # a join that cannot fit: 409 with the certificate naming the port and the busy window
        code, doc = svc.call(
            "POST", "/restconf/operations/keepon-cnc:join", join_body(B, "t2", latest_transmit_offset=0)
        )
        err = _error(doc)
        assert code == 409 and err["error-tag"] == "resource-denied"
        cert = err["error-info"]["keepon-cnc:certificate"]
        assert (
            cert["kind"] == "blocked" and cert["blocked"][0]["port"] == "swp3" and cert["blocked"][0]["busy_window_ps"]
        )

        # bad input, each naming the element
        bad = join_body(B, "t2")
        bad["keepon-cnc:input"]["talker"]["end-station-interfaces"][0]["mac-address"] = "02-00-00-00-00-77"
        code, doc = svc.call("POST", "/restconf/operations/keepon-cnc:join", bad)
        assert code == 400 and _error(doc)["error-path"].endswith("/talker/end-station-interfaces[0]/mac-address")
        code, doc = svc.call("POST", "/restconf/operations/keepon-cnc:join", raw=b"{not json")
        assert code == 400 and _error(doc)["error-tag"] == "malformed-message"
        code, doc = svc.call("POST", "/restconf/operations/keepon-cnc:join", join_body(B, "t2", interval=(3, 10000)))
        assert code == 400 and "does not divide the network's cycle" in _error(doc)["error-message"]
        code, doc = svc.call("POST", "/restconf/operations/keepon-cnc:join", join_body(B, "t2", latency=1000))
        assert code == 400 and _error(doc)["error-info"]["keepon-cnc:certificate"]["kind"] == "latency"

        code, doc = svc.call("GET", f"/restconf/data/keepon-cnc:streams/stream={A}")
        assert code == 200 and doc["keepon-cnc:output"]["stream-id"] == A
        code, doc = svc.call("GET", f"/restconf/data/keepon-cnc:streams/stream={B}")
        assert code == 404 and _error(doc)["error-tag"] == "data-missing"
    finally:
        said = svc.stop()
    assert "stopped" in said

    # restarted with the database alone: the stream is still in force; it leaves, and B then fits
    svc = Service(["--db", db])
    try:
        assert "1 streams in force" in "".join(svc.lines)
        code, doc = svc.call("GET", "/restconf/data/keepon-cnc:streams")
        assert code == 200 and [s["stream-id"] for s in doc["keepon-cnc:streams"]["stream"]] == [A]
        code, doc = svc.call("POST", "/restconf/operations/keepon-cnc:leave", leave_body(A))
        assert code == 200 and doc["keepon-cnc:output"]["keepon-cnc:state"] == "left"
        code, doc = svc.call(
            "POST", "/restconf/operations/keepon-cnc:join", join_body(B, "t2", latest_transmit_offset=0)
        )
        assert code == 200, doc
    finally:
        svc.stop()


def test_a_failed_first_start_leaves_no_database(tmp_path):
    """A new --db without a topology, or with a topology the CNC refuses, is bad input (exit 3) and no file stays."""
    from network_support import run

    db = tmp_path / "new.db"
    code, err = run("cnc", "--db", str(db))
    assert code == 3 and "a new database needs the topology" in err
    assert list(tmp_path.iterdir()) == []
    topo = tmp_path / "net.toml"
    topo.write_text(TOPOLOGY, encoding="utf-8")
    code, err = run("cnc", str(topo), "--db", str(db), "--cycle", "3ms")  # the rings last 1 ms, not 3
    assert code == 3 and "not the network's cycle" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.toml"]
    code, err = run("cnc", str(topo), "--db", str(db), "--cycle", "1ms", "--switch", "nosuch=127.0.0.1:1")
    assert code == 3 and "expected a switch of the topology" in err and not db.exists()
    # a station's [station.ptp] with a class the CNC does not give its daemon: named, no file
    t1 = 'name = "t1"\nslot_bytes = 230\nslots = 500\n'
    bad = TOPOLOGY.replace(t1, t1 + '[station.ptp]\nclass = "ptp"\n', 1)
    assert "[station.ptp]" in bad
    topo.write_text(bad, encoding="utf-8")
    code, err = run("cnc", str(topo), "--db", str(db), "--cycle", "1ms")
    assert code == 3 and "station 't1': ptp.class = \"ptp\": no such class" in err and not db.exists(), err
    # with a class it does, the first start says which ring slots PTP keeps (before the unknown switch stops it)
    topo.write_text(bad.replace('class = "ptp"', 'class = "tc6"'), encoding="utf-8")
    code, err = run("cnc", str(topo), "--db", str(db), "--cycle", "1ms", "--switch", "nosuch=127.0.0.1:1")
    assert "station t1: ptp: class 'tc6' keeps 1 ring slot a cycle for PTP that no stream takes" in err, err
    assert code == 3 and not db.exists()
    topo.write_text(TOPOLOGY, encoding="utf-8")
    # a database that was there before stays, even when the start fails
    new_cnc(db).store.close()
    code, err = run("cnc", "--db", str(db), "--switch", "nosuch=127.0.0.1:1")
    assert code == 3 and db.exists()
    assert new_cnc(db).store.config()["cycle_ns"] == "1000000"
