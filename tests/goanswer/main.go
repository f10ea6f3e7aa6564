// Command goanswer prints the answer of the Kubernetes scheduler's structured DRA
// allocator (k8s.io/dynamic-resource-allocation, the release pinned in go.mod or
// chosen by answer.py) to one allocator conformance question:
//
//	goanswer objects.yaml node claim[,claim...] [Gate,Gate...]
//
// objects.yaml holds the Node, DeviceClasses, ResourceSlices and ResourceClaims
// (claims with status.allocation count as in use). The named claims are allocated
// together on the node with exactly the listed allocator features on, twenty
// times, each with a new allocator; the answer is printed as one JSON object, or
// the program fails when the runs disagree (an answer that depends on Go's map
// order is no expectation).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"sigs.k8s.io/yaml"
)

const runs = 20

type answer struct {
	Allocatable bool                           `json:"allocatable"`
	Error       string                         `json:"error,omitempty"`
	NodeScoped  bool                           `json:"nodeScoped,omitempty"`
	Allocations []resourceapi.AllocationResult `json:"allocations,omitempty"`
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
	return nil, fmt.Errorf("deviceclasses.resource.k8s.io %q not found", name)
}

type world struct {
	classes classLister
	slices  []*resourceapi.ResourceSlice
	nodes   map[string]*v1.Node
	claims  map[string]*resourceapi.ResourceClaim
	order   []*resourceapi.ResourceClaim
}

func load(path string) (*world, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	w := &world{classes: classLister{}, nodes: map[string]*v1.Node{}, claims: map[string]*resourceapi.ResourceClaim{}}
	for i, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i, err)
		}
		var head struct{ Kind string }
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i, err)
		}
		if err := w.add(head.Kind, raw); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): %w", path, i, head.Kind, err)
		}
	}
	return w, nil
}

func (w *world) add(kind string, raw []byte) error {
	switch kind {
	case "Node":
		n := &v1.Node{}
		if err := json.Unmarshal(raw, n); err != nil {
			return err
		}
		w.nodes[n.Name] = n
	case "DeviceClass":
		c := &resourceapi.DeviceClass{}
		if err := json.Unmarshal(raw, c); err != nil {
			return err
		}
		w.classes[c.Name] = c
	case "ResourceSlice":
		s := &resourceapi.ResourceSlice{}
		if err := json.Unmarshal(raw, s); err != nil {
			return err
		}
		w.slices = append(w.slices, s)
	case "ResourceClaim":
		c := &resourceapi.ResourceClaim{}
		if err := json.Unmarshal(raw, c); err != nil {
			return err
		}
		w.claims[c.Name] = c
		w.order = append(w.order, c)
	default:
		return fmt.Errorf("kind %q is not read by goanswer", kind)
	}
	return nil
}

// allocatedState is what the scheduler's plugin derives from the claims in use: exclusively
// allocated devices, shares by share ID, and the capacity the shares took per device.
func (w *world) allocatedState() structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range w.order {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID == nil {
				state.AllocatedDevices.Insert(id)
				continue
			}
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			consumed := map[resourceapi.QualifiedName]resource.Quantity{}
			for name, q := range r.ConsumedCapacity {
				consumed[name] = q
			}
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, consumed))
		}
	}
	return state
}

// features sets the allocator's features by gate name, as Features.Set names each field (a field
// named "A+B" needs both gates on). A gate no field knows is an error, so a question never silently
// runs without it.
func features(gates []string) (structured.Features, error) {
	var f structured.Features
	on := sets.New[string]()
	for _, gate := range gates {
		switch gate {
		case "", "DRAExtendedResource", "DRADeviceTaintRules":
			continue // not allocator features
		}
		on.Insert(gate)
	}
	known := sets.New[string]()
	value := reflect.ValueOf(&f).Elem()
	for i := 0; i < value.NumField(); i++ {
		var one structured.Features
		name := value.Type().Field(i).Name
		reflect.ValueOf(&one).Elem().FieldByName(name).SetBool(true)
		for gate := range one.Set() {
			parts := strings.Split(gate, "+")
			known.Insert(parts...)
			if on.HasAll(parts...) {
				value.Field(i).SetBool(true)
			}
		}
	}
	if unknown := on.Difference(known); unknown.Len() > 0 {
		return f, fmt.Errorf("gates %v are not allocator features of this release", sets.List(unknown))
	}
	return f, nil
}

func allocate(w *world, node *v1.Node, claims []*resourceapi.ResourceClaim, f structured.Features) (answer, error) {
	ctx := context.Background()
	cache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: f.ConsumableCapacity, EnableListTypeAttributes: f.ListTypeAttributes})
	a, err := structured.NewAllocator(ctx, f, w.allocatedState(), w.classes, w.slices, cache)
	if err != nil {
		return answer{}, err
	}
	results, err := a.Allocate(ctx, node, claims)
	if err != nil {
		return answer{Error: err.Error(), NodeScoped: errors.Is(err, structured.ErrFailedAllocationOnNode)}, nil
	}
	for i := range results {
		for j := range results[i].Devices.Results {
			if results[i].Devices.Results[j].ShareID != nil {
				shared := "<generated UID>"
				results[i].Devices.Results[j].ShareID = ptrUID(shared)
			}
		}
	}
	return answer{Allocatable: results != nil, Allocations: results}, nil
}

func main() {
	if len(os.Args) < 4 || len(os.Args) > 5 {
		fmt.Fprintln(os.Stderr, "usage: goanswer objects.yaml node claim[,claim...] [Gate,Gate...]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], strings.Split(os.Args[3], ","), gateList(os.Args[4:])); err != nil {
		fmt.Fprintln(os.Stderr, "goanswer:", err)
		os.Exit(1)
	}
}

func gateList(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	return strings.Split(args[0], ",")
}

func run(path, nodeName string, claimNames, gates []string) error {
	w, err := load(path)
	if err != nil {
		return err
	}
	node, ok := w.nodes[nodeName]
	if !ok {
		return fmt.Errorf("no Node %s in %s", nodeName, path)
	}
	var claims []*resourceapi.ResourceClaim
	for _, name := range claimNames {
		c, ok := w.claims[name]
		if !ok {
			return fmt.Errorf("no ResourceClaim %s in %s", name, path)
		}
		claims = append(claims, c)
	}
	f, err := features(gates)
	if err != nil {
		return err
	}
	var first []byte
	for i := 0; i < runs; i++ {
		got, err := allocate(w, node, claims, f)
		if err != nil {
			return err
		}
		text, err := json.Marshal(got)
		if err != nil {
			return err
		}
		if first == nil {
			first = text
		} else if !bytes.Equal(first, text) {
			return fmt.Errorf("run %d answered otherwise than run 1 (the answer depends on map order):\n%s\n%s", i+1, first, text)
		}
	}
	fmt.Println(string(first))
	return nil
}

func ptrUID(s string) *types.UID {
	u := types.UID(s)
	return &u
}
