import pytest

from keepon_plan.evalplot import PlotError, inter_arrivals, jitter, main, read_arrivals

HEADER = "model,background,frame_bytes,seq,txtime_ns,outcome,tx_true_ns,rx_ns\n"


def write_csv(path, rows):
    path.write_text(HEADER + "".join(f"{m},{b},{n},{s},{s * 1000},sent,0.0,{rx}\n" for m, b, n, s, rx in rows))


def test_jitter_uses_consecutive_instances_only(tmp_path):
    p = tmp_path / "f.csv"
    # seq 2 never arrived: the 1 -> 3 gap is not an inter-arrival sample.
    write_csv(p, [("keepon", "idle", 64, 0, 0), ("keepon", "idle", 64, 1, 1000), ("keepon", "idle", 64, 3, 5000)])
    series = read_arrivals(p)
    ia = inter_arrivals(series[("keepon", "idle", 64)])
    assert ia == [1000]
    assert jitter(ia) == 0.0
    assert jitter([992, 1008]) == 8.0


def test_plots_are_written_from_the_raw_rows(tmp_path):
    p = tmp_path / "f.csv"
    rows = []
    for m, step in (("keepon", 0), ("launchtime", 8), ("stock-etf", 400)):
        for bg in ("idle", "busy"):
            for n in (64, 1230):
                rows += [(m, bg, n, s, s * 1_000_000 + (step if s % 2 else 0)) for s in range(50)]
    write_csv(p, rows)
    assert main(["fig15", str(p), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "fig15.png").stat().st_size > 0
    assert (tmp_path / "plots" / "fig15-hist.png").stat().st_size > 0


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    p = tmp_path / "f.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(PlotError, match="not a fig15 CSV"):
        read_arrivals(p)
    write_csv(p, [("keepon", "idle", "x", 0, 0)])
    assert main(["fig15", str(p), "--out", str(tmp_path)]) == 3
    assert "f.csv:2" in capsys.readouterr().err
    assert main(["fig15", str(tmp_path / "missing.csv"), "--out", str(tmp_path)]) == 3


def test_casestudy_plot_from_raw_rows(tmp_path, capsys):
    from keepon_plan.evalplot import read_delays

    p = tmp_path / "c.csv"
    rows = ["scenario,flow,seq,delay_ns"]
    for sc, extra in (("keepon", 0), ("stock-etf", 1_000_000)):
        for f in (2, 3, 4, 7, 8):
            rows += [f"{sc},{f},{s},{12_400 + (extra if s > 5 and f == 7 else 0)}" for s in range(20)]
    rows.append("keepon,2,20,")  # never arrived: skipped
    p.write_text("\n".join(rows) + "\n")
    d = read_delays(p)
    assert len(d[("keepon", 2)]) == 20
    assert d[("stock-etf", 7)][10] == (10, 1_012_400.0)
    assert main(["casestudy", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "casestudy-fig26.png").stat().st_size > 0
    p.write_text("flow\n1\n")
    assert main(["casestudy", str(p), "--out", str(tmp_path)]) == 3
    assert "not a casestudy CSV" in capsys.readouterr().err


def test_fig16_plot_from_raw_rows(tmp_path):
    from keepon_plan.evalplot import read_sweeps

    p = tmp_path / "s.csv"
    rows = ["sweep,x_us,model,seq,txtime_ns,outcome,tx_true_ns,rx_ns"]
    for sweep in ("advance", "period"):
        for m in ("keepon", "launchtime"):
            for x in (5, 50):
                for s in range(20):
                    late = m == "launchtime" and x == 5 and s % 2
                    rx = s * 1_000_000 + (3_000 if late else 0)
                    rows.append(f"{sweep},{x},{m},{s},{s * 1_000_000},{'late' if late else 'sent'},0,{rx}")
    rows.append("advance,5,keepon,20,0,late,,")  # refused: no arrival
    p.write_text("\n".join(rows) + "\n")
    series = read_sweeps(p)
    assert series[("advance", "keepon", 5)][-1] == (20, None, "late")
    assert main(["fig16", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fig16.png").stat().st_size > 0


def test_fig16_a_sweep_point_with_no_arrivals_has_no_jitter(tmp_path):
    """A point where every frame was refused is not drawn as a (fake) jitter value."""
    from keepon_plan.evalplot import PAPER_FIG16, fig16_points, read_sweeps

    p = tmp_path / "s.csv"
    rows = ["sweep,x_us,model,seq,txtime_ns,outcome,tx_true_ns,rx_ns"]
    rows += [f"advance,3,keepon,{s},{s * 1_000_000},late,," for s in range(10)]
    rows += [f"advance,5,keepon,{s},{s * 1_000_000},sent,0,{s * 1_000_000 + (8 if s % 2 else 0)}" for s in range(10)]
    p.write_text("\n".join(rows) + "\n")
    pts = fig16_points(read_sweeps(p), "advance", "keepon")
    assert pts[0] == (3, None, 0.0)
    assert pts[1][0] == 5 and pts[1][1] > 0 and pts[1][2] == 1.0
    # The paper's statements overlaid are bounds the paper's text gives, not invented points.
    assert PAPER_FIG16["advance"]["keepon"][2] == 10.0
    assert main(["fig16", str(p), "--out", str(tmp_path / "o")]) == 0


def test_fig18_plot_from_points(tmp_path, capsys):
    p = tmp_path / "p.csv"
    rows = ["packet_bytes,share_pct,offered_mbps,model,sent,refused,throughput_mbps"]
    for b in (200, 1400):
        for share in (25, 100):
            rows += [f"{b},{share},{r},keepon,1,0,{min(r, share * 9)}" for r in (100, 1000)]
        rows += [f"{b},100,{r},stock,1,0,{r}" for r in (100, 1000)]
    p.write_text("\n".join(rows) + "\n")
    assert main(["fig18", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fig18.png").stat().st_size > 0
    p.write_text(rows[0] + "\n200,25,x,keepon,1,0,3\n")
    assert main(["fig18", str(p), "--out", str(tmp_path)]) == 3
    assert "p.csv:2" in capsys.readouterr().err


def test_fig17_plot_from_points(tmp_path):
    p = tmp_path / "p.csv"
    rows = ["payload_bytes,slot_bytes,sent,refused,throughput_mbps,bound_mbps"]
    rows += [f"100,{s},1,1,{100_000 / (s + 20):.3},0" for s in (146, 400, 1518)]
    rows += [f"500,{s},1,1,{500_000 / (s + 20):.3},0" for s in (546, 1518)]
    p.write_text("\n".join(rows) + "\n")
    assert main(["fig17", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fig17.png").stat().st_size > 0
    p.write_text("slot\n1\n")
    assert main(["fig17", str(p), "--out", str(tmp_path)]) == 3


def test_fig19_plot_from_points(tmp_path):
    p = tmp_path / "p.csv"
    rows = ["sweep,core,batch,slot_bytes,poll_period_ns,cpu_percent,wire_busy_percent,underruns,rx_dropped"]
    for core in ("tx", "rx"):
        rows += [f"batch,{core},{b},300,0,{100 if b < 40 else 300 / b},100,0," for b in (30, 38, 40, 54)]
        rows += [f"slot,{core},32,{s},0,{100 if s <= 370 else 4000 / s},,,0" for s in (300, 370, 400, 790)]
    p.write_text("\n".join(rows) + "\n")
    assert main(["fig19", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fig19.png").stat().st_size > 0
    # A CSV from before the dual clock's RX core (no `core` column) is the TX core's.
    p.write_text("sweep,batch,slot_bytes,cpu_percent\nbatch,54,300,6.5\n")
    assert main(["fig19", str(p), "--out", str(tmp_path / "old")]) == 0
    p.write_text("sweep,batch,slot_bytes,cpu_percent\nwobble,1,300,5\n")
    assert main(["fig19", str(p), "--out", str(tmp_path)]) == 3
    p.write_text("sweep,core,batch,slot_bytes,cpu_percent\nbatch,gpu,54,300,5\n")
    assert main(["fig19", str(p), "--out", str(tmp_path)]) == 3


def test_records_plot_reads_v2_records(tmp_path, capsys):
    p = tmp_path / "r.csv"
    head = "seq,flow,class,txtime_ns,outcome,reason,slot,ring_slot,ephc_ns,tx_ns,rx_ns,sched_ns,off_schedule"
    rows = ["# keepon-records v2", head]
    for s in range(30):
        t = 1_000_000 + s * 320_000
        rows.append(f"{s},tc0,tc-0,{t},sent,,{s},0,{t},{t + (8 if s % 3 else 0)},{t + 16},{t},false")
    rows.append("0,be,tc-2,,sent,,5,3,1,1,,,false")  # best effort: no txtime, not plotted
    rows.append("31,tc0,tc-0,2,rejected,late,,,,,,,")
    p.write_text("\n".join(rows) + "\n")
    from keepon_plan.evalplot import read_records

    assert list(read_records(p)) == ["tc0"]
    assert len(read_records(p)["tc0"]) == 30
    assert main(["records", str(p), "--out", str(tmp_path / "o")]) == 0
    for name in ("records-interarrival.png", "records-deviation.png"):
        assert (tmp_path / "o" / name).stat().st_size > 0
    p.write_text("# keepon-records v2\nseq,flow\n1,a\n")
    assert main(["records", str(p), "--out", str(tmp_path)]) == 3
    assert "not a keepon records file" in capsys.readouterr().err


def test_robustness_plot_from_points(tmp_path, capsys):
    from keepon_plan.evalplot import read_robustness

    p = tmp_path / "r.csv"
    rows = ["sweep,x,model,seed,frames,on_time,lost,p99_dev_ns,max_dev_ns,underruns,misreported,early"]
    for sweep in ("host-jitter", "dma-stall"):
        for x in (0, 10, 100):
            for m in ("keepon-strict", "keepon-relaxed", "launchtime", "stock-etf"):
                for seed in (1, 2, 3):
                    dev = "" if (m == "stock-etf" and x == 100) else f"{x * seed}.0"
                    rows.append(f"{sweep},{x},{m},{seed},100,{1 - x / 200},0,{dev},{dev},,,")
    p.write_text("\n".join(rows) + "\n")
    pts = read_robustness(p)
    assert pts[("dma-stall", "launchtime", 10.0)] == [(0.95, 10.0), (0.95, 20.0), (0.95, 30.0)]
    assert pts[("host-jitter", "stock-etf", 100.0)][0] == (0.5, None)
    assert main(["robustness", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "robustness.png").stat().st_size > 0
    p.write_text("sweep,x\n1,2\n")
    assert main(["robustness", str(p), "--out", str(tmp_path / "o")]) == 3


def test_fig22_plot_from_per_second_medians(tmp_path):
    p = tmp_path / "c.csv"
    rows = ["mode,seed,second,median_abs_sync_error_ns"]
    rows += [f"single,1,{t},{3000 + 100 * (t % 3)}" for t in range(10)]
    rows += [f"dual,1,{t},{max(50, 1000 >> t)}" for t in range(10)]
    p.write_text("\n".join(rows) + "\n")
    assert main(["fig22", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fig22.png").stat().st_size > 0
    p.write_text("mode,seed\ndual,1\n")
    assert main(["fig22", str(p), "--out", str(tmp_path)]) == 3


def test_fig12_plot_from_runs(tmp_path):
    p = tmp_path / "f.csv"
    rows = ["kind,role,jitter_ns,seed,offset_mean_ns,true_mean_ns"]
    for kind, scale in (("hardware", 0.0), ("software", 0.25), ("keepon", 0.18)):
        for role in ("master", "slave"):
            for j in (500.0, 2000.0):
                rows += [f"{kind},{role},{j},{s},{2 + scale * j + s},{3 + scale * j}" for s in range(3)]
    p.write_text("\n".join(rows) + "\n")
    assert main(["fig12", str(p), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fig12.png").stat().st_size > 0
    p.write_text("kind,role\nkeepon,slave\n")
    assert main(["fig12", str(p), "--out", str(tmp_path)]) == 3
