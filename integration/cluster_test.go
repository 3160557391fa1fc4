//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/aifs/aifs/backend/s3/s3test"
	"github.com/aifs/aifs/plan"
)

// A simulated training cluster on one machine (the multi-node issue, docs/multinode.md): 4
// "nodes", each an aifs mount of one shard set in S3 with a disk cache of its own sized to a
// third of the set, each read by 2 ranks (processes with torchrun's variables, in one gloo
// process group) through ImageFolder and a DataLoader (torchcheck/cluster.py).
const (
	clusterNodes    = 4
	clusterLocal    = 2 // ranks per node
	clusterEpochs   = 3
	clusterFiles    = 4800 // divisible by the 8 ranks: every sample is read exactly once an epoch
	clusterMeanSize = 50000
	clusterChunk    = 4 << 20 // the disk cache's chunk (backend/diskcache.DefaultChunkSize)
)

// The cluster tests' source tree (about 240 MB of random bytes in 8 classes, ~60 chunks of 4
// MiB: a node's range is about 15 of them; the disk cache takes no less than 64 MiB) is written once.
var clusterData struct {
	once  sync.Once
	src   string
	files map[string]fileSum // by path relative to src
	bytes int64
	err   error
}

type fileSum struct {
	size int
	crc  uint32 // CRC-32 (IEEE), as Python's zlib.crc32
}

func clusterSource(t *testing.T) (string, map[string]fileSum, int64) {
	t.Helper()
	clusterData.once.Do(func() {
		gendata, err := buildGendata()
		if err != nil {
			clusterData.err = err
			return
		}
		src := filepath.Join(workDir, "cluster-source")
		gen := exec.Command(gendata, "--files", strconv.Itoa(clusterFiles), "--classes", "8",
			"--mean-size", strconv.Itoa(clusterMeanSize), "--sigma", "0.3", "--seed", "29", src)
		if out, err := gen.CombinedOutput(); err != nil {
			clusterData.err = fmt.Errorf("gendata: %w\n%s", err, out)
			return
		}
		files := map[string]fileSum{}
		var total int64
		clusterData.err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			files[rel] = fileSum{len(b), crc32.ChecksumIEEE(b)}
			total += int64(len(b))
			return nil
		})
		clusterData.src, clusterData.files, clusterData.bytes = src, files, total
	})
	if clusterData.err != nil {
		t.Fatalf("building the cluster data set: %v", clusterData.err)
	}
	return clusterData.src, clusterData.files, clusterData.bytes
}

// clusterRank is what torchcheck/cluster.py writes for one rank.
type clusterRank struct {
	Rank   int `json:"rank"`
	Node   int `json:"node"`
	Epochs []struct {
		Seconds float64  `json:"seconds"`
		Samples [][4]any `json:"samples"` // path, length, crc32, shard
		Stats   *struct {
			Storage  map[string]map[string]float64 `json:"storage"`
			Prefetch json.RawMessage               `json:"prefetch"`
			Plans    json.RawMessage               `json:"plans"`
			Epoch    json.RawMessage               `json:"epoch"`
		} `json:"stats"`
	} `json:"epochs"`
}

// nodeEpoch is one node's S3 traffic in one epoch.
type nodeEpoch struct {
	requests, fetched int64 // S3 requests; bytes the disk cache fetched
	hits, misses      int64 // the disk cache's chunk reads
	evictions, staged int64 // the disk cache's evictions and bytes staged
	used, writeErrors int64 // the disk cache's bytes held at the epoch's end, and failed writes
	samples           map[string]bool
	prefetch          string // the stats' prefetch, plans and epoch sections, for a failure's message
}

// runCluster mounts url (an S3 set on endpoint) clusterNodes times, each with its own disk
// cache of cacheSize bytes and prefetch_shards=on, reads clusterEpochs epochs with sampler
// ("aifs" or "torch") on clusterNodes·clusterLocal ranks, checks that every epoch read every
// sample of want exactly once with the source's bytes, and returns each node's traffic per
// epoch.
func runCluster(t *testing.T, url, endpoint, sampler string, want map[string]fileSum, cacheSize int64) [][]nodeEpoch {
	return runClusterOn(t, "fuse", url, endpoint, sampler, want, cacheSize)
}

// runClusterOn is runCluster on the data plane plane: "fuse" (the disk cache, prefetch_shards=on)
// or "kernel" (EROFS over copies in the cache directory; its fills stand for the disk cache's
// fetches, and reads that waited for one for its misses).
func runClusterOn(t *testing.T, plane, url, endpoint, sampler string, want map[string]fileSum, cacheSize int64) [][]nodeEpoch {
	t.Helper()
	mnts := make([]string, clusterNodes)
	stats := make([]string, clusterNodes) // the directory holding each node's .aifs
	before := make([]nodeEpoch, clusterNodes)
	for k := range mnts {
		cache := filepath.Join(t.TempDir(), "cache")
		if plane == "kernel" {
			mnts[k] = mountKernelS3(t, url, cache, ",s3_endpoint="+endpoint+",cache_size="+strconv.FormatInt(cacheSize, 10))
			stats[k] = filepath.Dir(plan.Control(mnts[k]))
		} else {
			mnts[k] = mountSet(t, url, "--s3-endpoint", endpoint, "--cache-dir", cache,
				"--cache-size", strconv.FormatInt(cacheSize, 10), "-o", "prefetch_shards=on")
			stats[k] = mnts[k]
		}
		s := readStats(t, stats[k])
		before[k] = nodeEpoch{requests: int64(s.Storage["s3"].(map[string]any)["requests"].(float64))}
	}
	port := freePort(t)
	script, err := filepath.Abs(filepath.Join("torchcheck", "cluster.py"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*pythonTimeout)
	defer cancel()
	world := clusterNodes * clusterLocal
	cmds := make([]*exec.Cmd, world)
	logs := make([]bytes.Buffer, world)
	for r := range world {
		k := r / clusterLocal
		cmd := exec.CommandContext(ctx, torchPython, script, "--root", mnts[k], "--stats", stats[k], "--sampler", sampler,
			"--epochs", strconv.Itoa(clusterEpochs), "--batch", "16", "--workers", "1", "--seed", "3",
			"--out", filepath.Join(out, fmt.Sprintf("rank-%d.json", r)))
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world),
			"LOCAL_RANK="+strconv.Itoa(r%clusterLocal), "LOCAL_WORLD_SIZE="+strconv.Itoa(clusterLocal),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "OMP_NUM_THREADS=1")
		cmd.Stdout, cmd.Stderr = &logs[r], &logs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	failed := false
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed = true
			t.Errorf("rank %d (%s sampler): %v\n%s", r, sampler, err, clip(logs[r].String()))
		}
	}
	if failed {
		t.FailNow()
	}

	traffic := make([][]nodeEpoch, clusterNodes)
	for k := range traffic {
		traffic[k] = make([]nodeEpoch, clusterEpochs)
		for e := range traffic[k] {
			traffic[k][e].samples = map[string]bool{}
		}
	}
	for e := range clusterEpochs {
		seen := map[string]int{}
		for r := range world {
			var cr clusterRank
			b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank-%d.json", r)))
			if err == nil {
				err = json.Unmarshal(b, &cr)
			}
			if err != nil || len(cr.Epochs) != clusterEpochs {
				t.Fatalf("rank %d's record: %v (%d epochs)", r, err, len(cr.Epochs))
			}
			k := r / clusterLocal
			ep := cr.Epochs[e]
			if n := len(ep.Samples); n != clusterFiles/world {
				t.Errorf("epoch %d: rank %d read %d samples, want %d", e+1, r, n, clusterFiles/world)
			}
			for _, s := range ep.Samples {
				path, _ := s[0].(string)
				size, _ := s[1].(float64)
				sum, _ := s[2].(float64)
				seen[path]++
				traffic[k][e].samples[path] = true
				if w, ok := want[path]; !ok || float64(w.size) != size || float64(w.crc) != sum {
					t.Errorf("epoch %d: rank %d read %s: %v bytes, CRC %v; the source has %+v (known: %v)", e+1, r, path, size, sum, w, ok)
				}
			}
			if ep.Stats != nil && plane == "kernel" {
				s3, kf := ep.Stats.Storage["s3"], ep.Stats.Storage["kernel_fill"]
				traffic[k][e].requests = int64(s3["requests"])
				traffic[k][e].fetched = int64(kf["demand_bytes"] + kf["ahead_bytes"])
				traffic[k][e].hits, traffic[k][e].misses = int64(kf["events"]-kf["waited"]), int64(kf["waited"])
				traffic[k][e].evictions, traffic[k][e].used = int64(kf["punched_chunks"]), int64(kf["filled_bytes"])
				traffic[k][e].prefetch = fmt.Sprintf("prefetch %s, plans %s, epoch %s", ep.Stats.Prefetch, ep.Stats.Plans, ep.Stats.Epoch)
			} else if ep.Stats != nil {
				s3, dc := ep.Stats.Storage["s3"], ep.Stats.Storage["disk_cache"]
				traffic[k][e].requests = int64(s3["requests"])
				traffic[k][e].fetched = int64(dc["fetched_bytes"])
				traffic[k][e].hits, traffic[k][e].misses = int64(dc["hits"]), int64(dc["misses"])
				traffic[k][e].evictions, traffic[k][e].staged = int64(dc["evictions"]), int64(dc["staged_bytes"])
				traffic[k][e].used, traffic[k][e].writeErrors = int64(dc["used_bytes"]), int64(dc["write_errors"])
				traffic[k][e].prefetch = fmt.Sprintf("prefetch %s, plans %s, epoch %s", ep.Stats.Prefetch, ep.Stats.Plans, ep.Stats.Epoch)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("epoch %d read %d distinct samples, want %d", e+1, len(seen), len(want))
		}
		for p, n := range seen {
			if n != 1 {
				t.Errorf("epoch %d read %s %d times", e+1, p, n)
			}
		}
	}
	// Turn the running totals into each epoch's own.
	for k := range traffic {
		prev := before[k]
		for e := range traffic[k] {
			cur := traffic[k][e]
			traffic[k][e].requests -= prev.requests
			traffic[k][e].fetched -= prev.fetched
			traffic[k][e].hits -= prev.hits
			traffic[k][e].misses -= prev.misses
			traffic[k][e].evictions -= prev.evictions
			traffic[k][e].staged -= prev.staged
			traffic[k][e].writeErrors -= prev.writeErrors
			prev = cur
		}
	}
	for k := range traffic {
		for e, ne := range traffic[k] {
			t.Logf("%s sampler, node %d, epoch %d: %d S3 requests, %.1f MB fetched (%.1f staged), %d chunk hits, %d misses, "+
				"%d evictions, %d write errors, %.1f MB held; %d samples", sampler, k, e+1, ne.requests, float64(ne.fetched)/1e6,
				float64(ne.staged)/1e6, ne.hits, ne.misses, ne.evictions, ne.writeErrors, float64(ne.used)/1e6, len(ne.samples))
		}
	}
	return traffic
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// checkShardAware checks the traffic of a cluster run with aifs_plan.DistributedSampler: each
// node reads the same samples every epoch; the cold epoch fetches the set about once in all
// (each cut between two nodes' ranges may cost a chunk twice, and a chunk the disk cache's
// writers could not take in time is read through); later epochs send no S3 request at all.
func checkShardAware(t *testing.T, traffic [][]nodeEpoch, data int64) {
	t.Helper()
	var cold int64
	for k, epochs := range traffic {
		cold += epochs[0].fetched
		if epochs[0].fetched > data/int64(len(traffic))+2*clusterChunk {
			t.Errorf("node %d fetched %.1f MB in the cold epoch, more than its range and a chunk at each end: %s",
				k, float64(epochs[0].fetched)/1e6, epochs[0].prefetch)
		}
		for e, ne := range epochs {
			if e > 0 {
				if ne.requests != 0 || ne.misses != 0 {
					t.Errorf("node %d, epoch %d: %d S3 requests, %d chunk misses; want 0 from epoch 2", k, e+1, ne.requests, ne.misses)
				}
				if !maps.Equal(ne.samples, epochs[0].samples) {
					t.Errorf("node %d read other samples in epoch %d than in epoch 1", k, e+1)
				}
			}
		}
	}
	if limit := data + int64(clusterNodes-1)*clusterChunk; cold < data || cold > limit {
		t.Errorf("the cold epoch fetched %.1f MB across the nodes; want the set's %.1f MB, at most %.1f", float64(cold)/1e6, float64(data)/1e6, float64(limit)/1e6)
	}
	t.Logf("cold epoch: %.2f× the set fetched across %d nodes", float64(cold)/float64(data), clusterNodes)
}

// TestClusterS3: 4 nodes over one S3 set (versitygw), 2 ranks each, caches of a third of the
// set. With aifs_plan.DistributedSampler each node fetches only its range, once: the cold
// epoch pulls the set about once in all and later epochs send no request. With torch's
// DistributedSampler, run the same way, every node fetches from all over the set: the cold
// epoch pulls it several times over and the caches, too small for the whole set, keep missing.
func TestClusterS3(t *testing.T) {
	srv := s3Server(t)
	src, want, data := clusterSource(t)
	url := "s3://" + srv.Bucket + "/cluster"
	mustAifs(t, "pack", "--quiet", "--align", "0", "--shard-size", "16M", src, url) // end to end: the set's bytes are the files'

	checkShardAware(t, runCluster(t, url, srv.Endpoint, "aifs", want, data/3), data)

	traffic := runCluster(t, url, srv.Endpoint, "torch", want, data/3)
	var cold, later int64
	for _, epochs := range traffic {
		cold += epochs[0].fetched
		later += epochs[1].requests + epochs[2].requests
	}
	if cold < 2*data || later == 0 {
		t.Errorf("torch's DistributedSampler: the cold epoch fetched %.2f× the set, epochs 2-3 sent %d S3 requests; "+
			"want ≥ 2× and some (every node reads from every chunk, and a third of the set does not hold them)",
			float64(cold)/float64(data), later)
	}
	t.Logf("torch's DistributedSampler: cold epoch %.2f× the set across the nodes, %d S3 requests in epochs 2-3", float64(cold)/float64(data), later)
}

// TestClusterMinIO is TestClusterS3's run with aifs_plan.DistributedSampler against MinIO in
// erasure-coded mode (one server over 4 drives, 2 data and 2 parity shards per object), the
// object store a team that outgrows one machine runs.
func TestClusterMinIO(t *testing.T) {
	srv := s3test.StartMinIO(t)
	setS3Env(t, srv)
	src, want, data := clusterSource(t)
	url := "s3://" + srv.Bucket + "/cluster"
	mustAifs(t, "pack", "--quiet", "--align", "0", "--shard-size", "16M", src, url) // end to end: the set's bytes are the files'
	checkShardAware(t, runCluster(t, url, srv.Endpoint, "aifs", want, data/3), data)
}

// TestClusterKernel is TestClusterS3's run with aifs_plan.DistributedSampler on the kernel data
// plane over S3 (docs/kernel.md, "The plane over S3"): each node fills the copies of its range
// only, the set about once across the nodes, and from epoch 2 sends no S3 request.
func TestClusterKernel(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, want, data := clusterSource(t)
	url := "s3://" + srv.Bucket + "/cluster-kernel"
	mustAifs(t, "pack", "--quiet", "--shard-size", "16M", src, url) // aligned, for EROFS
	set := shardBytes(t, srv, "cluster-kernel")                     // the files' bytes and their alignment
	t.Logf("the set: %.1f MB of files in %.1f MB of shards", float64(data)/1e6, float64(set)/1e6)
	checkShardAware(t, runClusterOn(t, "kernel", url, srv.Endpoint, "aifs", want, data/3), set)
}
