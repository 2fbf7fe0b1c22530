// kube-strict reads Kubernetes manifests (a YAML stream on stdin) and decodes each document
// strictly into the Go type of its kind from k8s.io/api at the version this binary was built
// with: an unknown or misspelt field, a duplicate field or a value of the wrong type is an
// error. It complements schema validation (required fields, formats), which is lenient about
// fields it does not know. Built per Kubernetes version by scripts/kube-strict.sh; offline.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The kinds a chart may render; anything else is reported, never passed unchecked.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}
	case "batch/v1/Job":
		return &batchv1.Job{}
	case "v1/Pod":
		return &corev1.Pod{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "networking.k8s.io/v1/Ingress":
		return &networkingv1.Ingress{}
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "rbac.authorization.k8s.io/v1/Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		return &rbacv1.RoleBinding{}
	}
	if f, ok := extra[apiVersion+"/"+kind]; ok {
		return f()
	}
	return nil
}

// Kinds of custom resources, added by monitoring.go in the build that has their types (the
// newest Kubernetes version only: their module needs a recent k8s.io/api).
var extra = map[string]func() any{}

// Custom resources this build has no types for: another build checks them.
var elsewhere = map[string]bool{"monitoring.coreos.com/v1/ServiceMonitor": true, "monitoring.coreos.com/v1/PrometheusRule": true}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func main() {
	data, err := io.ReadAll(bufio.NewReader(os.Stdin))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	failed, checked := 0, 0
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(strings.TrimSpace(stripComments(string(doc)))) == 0 {
			continue
		}
		var h header
		if err := yaml.Unmarshal(doc, &h); err != nil {
			fmt.Printf("unreadable document: %v\n", err)
			failed++
			continue
		}
		obj := newObject(h.APIVersion, h.Kind)
		if obj == nil && elsewhere[h.APIVersion+"/"+h.Kind] {
			fmt.Printf("%s %s: not a Kubernetes kind, checked by the build with its types\n", h.Kind, h.Metadata.Name)
			continue
		}
		if obj == nil {
			fmt.Printf("%s %s: no strict type for %s/%s\n", h.Kind, h.Metadata.Name, h.APIVersion, h.Kind)
			failed++
			continue
		}
		// As the API server decodes: field names are case-sensitive (encoding/json's are not, so a
		// misspelt readOnlyRootFileSystem would pass it), unknown and repeated fields are errors.
		data, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			fmt.Printf("%s %s: %v\n", h.Kind, h.Metadata.Name, err)
			failed++
			continue
		}
		strict, err := kjson.UnmarshalStrict(data, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err == nil && len(strict) > 0 {
			err = fmt.Errorf("%v", strict)
		}
		if err != nil {
			fmt.Printf("%s %s: %v\n", h.Kind, h.Metadata.Name, err)
			failed++
			continue
		}
		checked++
	}
	fmt.Printf("checked %d, failed %d\n", checked, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
