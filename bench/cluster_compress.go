package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/server"
)

// Issue 52's sweep: every --remote-compress setting side by side behind
// an office uplink. thindist reaches the simulated cluster through a
// relay (relay.go) that holds every byte half the round trip each way
// and lets the given bandwidth through each way; the simulation itself
// then adds no round trip and no bandwidth limit of its own. auto links
// twice per bandwidth with the same cache directory: the first with
// nothing known of the service (its notes are per address, and the
// relay's address stays for the bandwidth's links), the second with what
// the first measured.

// compressRun is one link of the sweep.
type compressRun struct {
	mbits    float64
	rtt      time.Duration // the relay's
	workers  int
	setting  string
	recalled bool // auto's second link, with the first's measurements
	run      clusterRun
	// choice is what `thindist report` says auto chose, "" for the
	// explicit settings.
	choice string
	// backend is the real endpoint linked against (-cluster-backend), ""
	// for the simulation.
	backend string
}

func (c compressRun) label() string {
	if c.setting != "auto" {
		return c.setting
	}
	if c.recalled {
		return "auto (recalled)"
	}
	return "auto (first link)"
}

// measureCompress runs the sweep: each bandwidth of -cluster-mbits, each
// setting of -cluster-compress.
func (res *clusterResult) measureCompress(ctx context.Context, t *tools, o *options, p *project, dir, out, recording string) error {
	mbits, err := parseFloats(o.clusterMbits)
	if err != nil {
		return fmt.Errorf("-cluster-mbits: %v", err)
	}
	for _, mb := range mbits {
		via, err := startRelay(o.clusterRelayRTT, mb*1e6)
		if err != nil {
			return err
		}
		for _, setting := range strings.Split(o.clusterCompress, ",") {
			setting = strings.TrimSpace(setting)
			cache := filepath.Join(dir, fmt.Sprintf("compress-%gmbit-%s", mb, setting))
			os.RemoveAll(cache)
			links := 1
			if setting == "auto" {
				links = 2
			}
			for k := range links {
				c := server.SimConfig{Recording: recording, Workers: o.clusterCompressWorkers}
				flags := []string{"--remote-compress=" + setting, "--cache-dir=" + cache}
				var r clusterRun
				if o.clusterBackend != "" {
					r, err = backendLinkVia(ctx, t, o, p, dir, out, via, flags...)
				} else {
					r, err = clusterLinkVia(ctx, t, o, p, dir, out, c, "", via, flags...)
				}
				if err != nil {
					via.Close()
					return fmt.Errorf("%g Mbit/s, --remote-compress=%s: %w", mb, setting, err)
				}
				cr := compressRun{mbits: mb, rtt: o.clusterRelayRTT, workers: c.Workers, setting: setting, recalled: k > 0, run: r, choice: compressChoice(ctx, t, cache), backend: o.clusterBackend}
				res.compress = append(res.compress, cr)
				fmt.Fprintf(os.Stderr, "bench: %s behind %g Mbit/s, %s: %s wall, %d remote, %.1f MiB up (%.1f on the wire), %.1f MiB down; %s\n",
					p.build.Name, mb, cr.label(), sec(r.wall), r.remoteActions(), mibs(r.stats.BytesUploadedRaw), mibs(r.stats.BytesUploadedWire),
					mibs(r.stats.BytesReadRaw), cr.choice)
			}
		}
		via.Close()
	}
	return nil
}

// compressChoice is the "compress:" line of `thindist report` on the
// last link kept in cache, "" if there is none.
func compressChoice(ctx context.Context, t *tools, cache string) string {
	out, _ := exec.CommandContext(ctx, t.thindist, "--cache-dir="+cache, "report").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "compress: "); ok {
			return s
		}
	}
	return ""
}

func mibs(n int64) float64 { return float64(n) / (1 << 20) }

// compressMarkdown is the sweep's table, one row per link.
func compressMarkdown(b *strings.Builder, rs []*projectResult) {
	var first *compressRun
	for _, r := range rs {
		if len(r.cluster.compress) > 0 && first == nil {
			first = &r.cluster.compress[0]
		}
	}
	if first == nil {
		return
	}
	if first.backend == "" {
		fmt.Fprintf(b, "\n**Behind an uplink (issue 52)**: thindist reaches the simulated cluster (W = %d) through a relay "+
			"(bench/relay.go) that holds every byte %s each way and lets the given bandwidth through each way, shared by all "+
			"connections; the simulation adds no round trip or bandwidth of its own. auto links twice with one cache directory: "+
			"first with nothing known of the service, then with what that link measured.\n\n", first.workers, first.rtt/2)
	} else {
		fmt.Fprintf(b, "\n**Behind an uplink (issue 52), a REAL cluster**: thindist reaches the REAPI endpoint %s (-cluster-backend; "+
			"its workers replay the recording, W = %d slots) through a relay (bench/relay.go) that holds every byte %s each way and "+
			"lets the given bandwidth through each way; the cluster is emptied before each link (-cluster-backend-reset). "+
			"MiB up are thindist's own counts (its remote summary line); MiB down is what the relay carried down, gRPC's framing "+
			"included. auto links twice with one cache directory: first with nothing known of the service, then with what that "+
			"link measured.\n\n", first.backend, first.workers, first.rtt/2)
	}
	b.WriteString("| project | Mbit/s | --remote-compress | wall | wall / ideal | remote | MiB up (on the wire) | MiB down | auto chose |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		c := r.cluster
		for _, x := range c.compress {
			id := c.ideal(clusterPoint{workers: x.workers}, x.run)
			fmt.Fprintf(b, "| %s | %g | %s | %s | %.3f | %d | %.1f (%.1f) | %.1f | %s |\n", r.p.name, x.mbits, x.label(), sec(x.run.wall),
				ratio(x.run.wall, id), x.run.remoteActions(), mibs(x.run.stats.BytesUploadedRaw), mibs(x.run.stats.BytesUploadedWire),
				mibs(x.run.stats.BytesReadRaw), x.choice)
		}
	}
}
