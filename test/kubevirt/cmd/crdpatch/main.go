// Command crdpatch completes the CRDs controller-gen makes from kubevirt.io/api/core/v1 with
// what KubeVirt's own operator adds outside the Go types (KubeVirt's types carry no
// kubebuilder markers; KubeVirt builds its CRDs in virt-operator,
// pkg/virt-operator/resource/generate/components/crds.go): the status subresource, short
// names, the "all" category and printer columns. It keeps the kinds the lab serves, drops the
// rest (controller-gen also takes DataVolumeTemplateSpec, which has ObjectMeta, for a kind)
// and writes them as one YAML stream, sorted by name, to stdout.
//
// Usage: crdpatch DIR   (DIR: controller-gen's output:crd:dir)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

type extra struct {
	short   []string
	columns []apiextv1.CustomResourceColumnDefinition
}

func col(name, typ, path string) apiextv1.CustomResourceColumnDefinition {
	return apiextv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path}
}

// kinds the lab serves, by plural (KubeVirt's names, short names and columns)
var kinds = map[string]extra{
	"virtualmachines": {[]string{"vm", "vms"}, []apiextv1.CustomResourceColumnDefinition{
		col("Age", "date", ".metadata.creationTimestamp"),
		col("Status", "string", ".status.printableStatus"),
		col("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
	}},
	"virtualmachineinstances": {[]string{"vmi", "vmis"}, []apiextv1.CustomResourceColumnDefinition{
		col("Age", "date", ".metadata.creationTimestamp"),
		col("Phase", "string", ".status.phase"),
		col("NodeName", "string", ".status.nodeName"),
		col("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
	}},
	"kubevirts": {[]string{"kv", "kvs"}, []apiextv1.CustomResourceColumnDefinition{
		col("Age", "date", ".metadata.creationTimestamp"),
		col("Phase", "string", ".status.phase"),
	}},
	"virtualmachineinstancemigrations": {[]string{"vmim", "vmims"}, []apiextv1.CustomResourceColumnDefinition{
		col("Phase", "string", ".status.phase"),
		col("VMI", "string", ".spec.vmiName"),
	}},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.yaml"))
	if err != nil {
		panic(err)
	}
	sort.Strings(files)
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			fmt.Fprintf(os.Stderr, "crdpatch: %s: %v\n", f, err)
			os.Exit(1)
		}
		x, ok := kinds[crd.Spec.Names.Plural]
		if !ok {
			continue
		}
		seen++
		crd.Spec.Names.ShortNames = x.short
		crd.Spec.Names.Categories = []string{"all"}
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			v.Subresources = &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}}
			v.AdditionalPrinterColumns = x.columns
		}
		crd.Annotations["hvupdater.lab/generated-from"] = "kubevirt.io/api@v1.9.0 core/v1 by test/kubevirt/crds/gen.sh"
		out, err := yaml.Marshal(&crd)
		if err != nil {
			panic(err)
		}
		fmt.Printf("---\n%s", out)
	}
	if seen != len(kinds) {
		fmt.Fprintf(os.Stderr, "crdpatch: %d of the %d kinds found in %s\n", seen, len(kinds), os.Args[1])
		os.Exit(1)
	}
}
