// The lab's DRA driver, a FIXTURE stand-in for NVIDIA's DRA driver for GPUs (which cannot be had here):
// a real kubelet plugin on k8s.io/dynamic-resource-allocation's kubeletplugin helper. It publishes a
// ResourceSlice of its node's FIXTURE GPUs, with the attributes and capacity NVIDIA's driver publishes
// (productName, type, uuid, architecture, memory; read from a JSON file the lab writes from a real H200's
// nvidia-smi output), and prepares a claim by writing a CDI spec whose edits give the container the
// device's UUID, as NVIDIA_VISIBLE_DEVICES. The kubelet registers it, the scheduler allocates from its
// slice, and containerd applies its CDI edits: every part but the driver is Kubernetes' own.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// cdiKind is the CDI vendor and class of the devices this driver's specs define.
const cdiKind = "gpufleet.io/lab-gpu"

// device is one FIXTURE GPU of the devices file: attributes as typed values, capacity as quantities.
type device struct {
	Name       string                     `json:"name"`
	Attributes map[string]json.RawMessage `json:"attributes"`
	Capacity   map[string]string          `json:"capacity"`
}

type driver struct {
	name    string
	cdiDir  string
	devices map[string]device
	mu      sync.Mutex
}

func main() {
	nodeName := flag.String("node-name", os.Getenv("NODE_NAME"), "the node whose kubelet this plugin serves")
	driverName := flag.String("driver-name", "gpu.nvidia.com", "the driver's name, its attributes' domain")
	devicesFile := flag.String("devices", "/etc/gpufleet-lab-dra/devices.json", "JSON: node name -> its devices")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where containerd finds CDI specs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *nodeName, *driverName, *devicesFile, *cdiDir); err != nil {
		klog.ErrorS(err, "lab DRA driver failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, nodeName, driverName, devicesFile, cdiDir string) error {
	if nodeName == "" {
		return fmt.Errorf("no node name: set --node-name or NODE_NAME")
	}
	raw, err := os.ReadFile(devicesFile)
	if err != nil {
		return err
	}
	var byNode map[string][]device
	if err := json.Unmarshal(raw, &byNode); err != nil {
		return fmt.Errorf("%s: %w", devicesFile, err)
	}
	d := &driver{name: driverName, cdiDir: cdiDir, devices: map[string]device{}}
	var published []resourceapi.Device
	for _, dev := range byNode[nodeName] {
		api, err := dev.toAPI()
		if err != nil {
			return fmt.Errorf("%s: device %s: %w", devicesFile, dev.Name, err)
		}
		d.devices[dev.Name] = dev
		published = append(published, api)
	}
	if err := os.MkdirAll(cdiDir, 0o755); err != nil {
		return err
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	pluginDir := filepath.Join("/var/lib/kubelet/plugins", driverName)
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return err
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(nodeName),
		kubeletplugin.DriverName(driverName),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.RegistrarDirectoryPath("/var/lib/kubelet/plugins_registry"),
	)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	pools := map[string]resourceslice.Pool{nodeName: {Slices: []resourceslice.Slice{{Devices: published}}}}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: pools}); err != nil {
		return fmt.Errorf("publish the ResourceSlice: %w", err)
	}
	klog.InfoS("serving", "node", nodeName, "driver", driverName, "devices", len(published))
	<-ctx.Done()
	return nil
}

// toAPI is the device as its ResourceSlice lists it; each attribute is {"string": ...}, {"int": ...},
// {"bool": ...} or {"version": ...}, as the API's DeviceAttribute has them.
func (dev device) toAPI() (resourceapi.Device, error) {
	out := resourceapi.Device{
		Name:       dev.Name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
	}
	for name, raw := range dev.Attributes {
		var value struct {
			String  *string `json:"string"`
			Int     *int64  `json:"int"`
			Bool    *bool   `json:"bool"`
			Version *string `json:"version"`
		}
		if err := json.Unmarshal(raw, &value); err != nil {
			return out, fmt.Errorf("attribute %s: %w", name, err)
		}
		out.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{
			StringValue: value.String, IntValue: value.Int, BoolValue: value.Bool, VersionValue: value.Version,
		}
	}
	for name, quantity := range dev.Capacity {
		q, err := resource.ParseQuantity(quantity)
		if err != nil {
			return out, fmt.Errorf("capacity %s: %w", name, err)
		}
		out.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: q}
	}
	return out, nil
}

// PrepareResourceClaims writes one CDI spec per claim: a CDI device per allocated GPU, whose edits set
// NVIDIA_VISIBLE_DEVICES to its UUID (what NVIDIA's driver has the container toolkit do).
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	results := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		results[claim.UID] = d.prepare(claim)
	}
	return results, nil
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	type cdiDevice struct {
		Name           string              `json:"name"`
		ContainerEdits map[string][]string `json:"containerEdits"`
	}
	var prepared []kubeletplugin.Device
	var specs []cdiDevice
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != d.name {
			continue
		}
		dev, ok := d.devices[result.Device]
		if !ok {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("device %s is not this node's", result.Device)}
		}
		uuid := dev.Name
		if raw, ok := dev.Attributes["uuid"]; ok {
			var value struct{ String string }
			if json.Unmarshal(raw, &value) == nil && value.String != "" {
				uuid = value.String
			}
		}
		name := fmt.Sprintf("%s-%s", claim.UID, result.Device)
		specs = append(specs, cdiDevice{Name: name, ContainerEdits: map[string][]string{
			"env": {"NVIDIA_VISIBLE_DEVICES=" + uuid, "GPUFLEET_LAB_DRA_DEVICE=" + result.Device},
		}})
		prepared = append(prepared, kubeletplugin.Device{
			Requests: []string{result.Request}, PoolName: result.Pool, DeviceName: result.Device,
			CDIDeviceIDs: []string{cdiKind + "=" + name},
		})
	}
	spec, err := json.Marshal(map[string]any{"cdiVersion": "0.6.0", "kind": cdiKind, "devices": specs})
	if err == nil {
		err = os.WriteFile(d.specPath(claim.UID), spec, 0o644)
	}
	if err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("write the CDI spec: %w", err)}
	}
	return kubeletplugin.PrepareResult{Devices: prepared}
}

// UnprepareResourceClaims removes the claims' CDI specs.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	results := map[types.UID]error{}
	for _, claim := range claims {
		if err := os.Remove(d.specPath(claim.UID)); err != nil && !os.IsNotExist(err) {
			results[claim.UID] = err
		} else {
			results[claim.UID] = nil
		}
	}
	return results, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.cdiDir, fmt.Sprintf("gpufleet-lab-gpu-%s.json", uid))
}
