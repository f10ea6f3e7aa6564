// Command goalloc times the Kubernetes scheduler's structured DRA allocator
// (k8s.io/dynamic-resource-allocation, the release pinned in go.mod) on the
// scenarios bench/bench_go_compare.py writes, so both allocators answer the
// same question on the same objects.
//
//	goalloc scenarios.json   -> one JSON line per scenario on stdout
//
// The input holds clusters (device classes, resource slices, nodes and the
// claims already allocated) and scenarios (a cluster, the claims of one pod,
// the nodes to try in order). One operation is a first-fit pass (Allocate on
// each node in turn until one succeeds) or, with "each", one Allocate call on
// each node of the list, timed per call. One allocator serves a scenario, as
// the scheduler makes one per pod and scheduling attempt.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"syscall"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type cluster struct {
	Classes   []resourceapi.DeviceClass   `json:"classes"`
	Slices    []resourceapi.ResourceSlice `json:"slices"`
	Nodes     []v1.Node                   `json:"nodes"`
	Allocated []resourceapi.ResourceClaim `json:"allocated"`
}

type scenario struct {
	Name    string                      `json:"name"`
	Cluster string                      `json:"cluster"`
	Claims  []resourceapi.ResourceClaim `json:"claims"`
	Nodes   []string                    `json:"nodes"`
	// Each: Allocate on every node (timed per call); otherwise a first-fit pass is one operation.
	Each   bool `json:"each"`
	Repeat int  `json:"repeat"`
	Calls  int  `json:"calls"`
}

type input struct {
	Clusters  map[string]*cluster `json:"clusters"`
	Scenarios []scenario          `json:"scenarios"`
	// Memory names a cluster whose objects' heap size is measured once.
	Memory string `json:"memory"`
}

type result struct {
	Name     string  `json:"name"`
	Fits     string  `json:"fits"`      // the first node that fits, "" if none
	MinNs    float64 `json:"min_ns"`    // CPU time per operation, lowest of the repetitions
	MedianNs float64 `json:"median_ns"` // and their median
	Error    string  `json:"error,omitempty"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("device class %s does not exist", name)
}

// The 1.35 defaults: admin access and prioritized lists on, the alpha features off.
var features = structured.Features{AdminAccess: true, PrioritizedList: true}

func allocatedState(claims []resourceapi.ResourceClaim) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			state.AllocatedDevices.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	return state
}

type prepared struct {
	classes classLister
	slices  []*resourceapi.ResourceSlice
	nodes   map[string]*v1.Node
	state   structured.AllocatedState
}

func prepare(c *cluster) *prepared {
	p := &prepared{classes: classLister{}, nodes: map[string]*v1.Node{}, state: allocatedState(c.Allocated)}
	for i := range c.Classes {
		p.classes[c.Classes[i].Name] = &c.Classes[i]
	}
	for i := range c.Slices {
		p.slices = append(p.slices, &c.Slices[i])
	}
	for i := range c.Nodes {
		p.nodes[c.Nodes[i].Name] = &c.Nodes[i]
	}
	return p
}

func firstFit(ctx context.Context, a structured.Allocator, nodes []*v1.Node, claims []*resourceapi.ResourceClaim) (string, error) {
	for _, node := range nodes {
		found, err := a.Allocate(ctx, node, claims)
		if err != nil {
			return "", err
		}
		if found != nil {
			return node.Name, nil
		}
	}
	return "", nil
}

// everyNode answers how many of the nodes fit, as "<fit> of <nodes>".
func everyNode(ctx context.Context, a structured.Allocator, nodes []*v1.Node, claims []*resourceapi.ResourceClaim) (string, error) {
	fit := 0
	for _, node := range nodes {
		found, err := a.Allocate(ctx, node, claims)
		if err != nil {
			return "", err
		}
		if found != nil {
			fit++
		}
	}
	return fmt.Sprintf("%d of %d", fit, len(nodes)), nil
}

func run(ctx context.Context, p *prepared, s scenario, cache *cel.Cache) result {
	out := result{Name: s.Name}
	claims := make([]*resourceapi.ResourceClaim, len(s.Claims))
	for i := range s.Claims {
		claims[i] = &s.Claims[i]
	}
	nodes := make([]*v1.Node, len(s.Nodes))
	for i, name := range s.Nodes {
		nodes[i] = p.nodes[name]
		if nodes[i] == nil {
			out.Error = "unknown node " + name
			return out
		}
	}
	a, err := structured.NewAllocator(ctx, features, p.state, p.classes, p.slices, cache)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	operation, perOperation := firstFit, s.Calls
	if s.Each {
		operation, perOperation = everyNode, s.Calls*len(nodes)
	}
	if out.Fits, err = operation(ctx, a, nodes, claims); err != nil { // warm-up, and the answer
		out.Error = err.Error()
		return out
	}
	per := make([]float64, 0, s.Repeat)
	for r := 0; r < s.Repeat; r++ {
		start := cpuTime()
		for c := 0; c < s.Calls; c++ {
			_, _ = operation(ctx, a, nodes, claims)
		}
		per = append(per, float64(cpuTime()-start)/float64(perOperation))
	}
	sort.Float64s(per)
	out.MinNs, out.MedianNs = per[0], per[len(per)/2]
	return out
}

// cpuTime is the CPU time of the whole process (garbage collection included) in nanoseconds: on a
// shared machine less disturbed by other work than wall time, and what the Python side measures.
func cpuTime() int64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		panic(err)
	}
	return usage.Utime.Nano() + usage.Stime.Nano()
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memory decodes the named cluster's objects alone and reports the heap they hold with the allocator
// made from them (what a scheduler keeps in its informer caches for these objects).
func memory(raw []byte, name string) (map[string]any, error) {
	var only struct {
		Clusters map[string]json.RawMessage `json:"clusters"`
	}
	if err := json.Unmarshal(raw, &only); err != nil {
		return nil, err
	}
	data := []byte(only.Clusters[name])
	only.Clusters = nil
	before := heapAlloc()
	var c cluster
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	data = nil
	p := prepare(&c)
	a, err := structured.NewAllocator(context.Background(), features, p.state, p.classes, p.slices, cel.NewCache(10, cel.Features{}))
	if err != nil {
		return nil, err
	}
	after := heapAlloc()
	devices := 0
	for i := range c.Slices {
		devices += len(c.Slices[i].Spec.Devices)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(p)
	return map[string]any{"memory": name, "devices": devices, "heap_bytes": after - before}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: goalloc scenarios.json")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	encoder := json.NewEncoder(os.Stdout)
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fmt.Fprintln(os.Stderr, "decode", os.Args[1]+":", err)
		os.Exit(1)
	}
	ctx := context.Background()
	cache := cel.NewCache(100, cel.Features{})
	preparedClusters := map[string]*prepared{}
	for name, c := range in.Clusters {
		if name != in.Memory {
			preparedClusters[name] = prepare(c)
		}
	}
	for _, s := range in.Scenarios {
		p := preparedClusters[s.Cluster]
		if p == nil {
			_ = encoder.Encode(result{Name: s.Name, Error: "unknown cluster " + s.Cluster})
			continue
		}
		_ = encoder.Encode(run(ctx, p, s, cache))
	}
	if name := in.Memory; name != "" {
		in, preparedClusters = input{}, nil
		found, err := memory(raw, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "memory:", err)
			os.Exit(1)
		}
		_ = encoder.Encode(found)
	}
}
