// Command crd checks Prometheus Operator resources offline: each YAML document
// is decoded strictly into the operator's own Go types, so an unknown field, a
// misspelt key or a value of the wrong type fails, as the API server's CRD
// schema would refuse it. Usage: crd FILE...
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	yamlv3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"
)

// typeMeta is read first to pick the Go type a document decodes into.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crd FILE...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := checkFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// checkFile decodes every document of a multi-document YAML file.
func checkFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return errors.New("no YAML document")
	}
	for i, doc := range docs {
		kind, err := checkDocument(doc)
		if err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
		fmt.Printf("%s: %s ok (strict, monitoring.coreos.com/v1 Go types)\n", path, kind)
	}
	return nil
}

// splitDocuments re-encodes each YAML document on its own, skipping empty ones.
func splitDocuments(data []byte) ([][]byte, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var docs [][]byte
	for {
		var node yamlv3.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(node.Content) == 0 {
			continue
		}
		out, err := yamlv3.Marshal(&node)
		if err != nil {
			return nil, err
		}
		docs = append(docs, out)
	}
}

// checkDocument decodes one document strictly into the type its kind names.
func checkDocument(doc []byte) (string, error) {
	var meta typeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return "", err
	}
	if meta.APIVersion != monitoringv1.SchemeGroupVersion.String() {
		return "", fmt.Errorf("apiVersion %q, want %q", meta.APIVersion, monitoringv1.SchemeGroupVersion.String())
	}
	var target interface{}
	switch meta.Kind {
	case monitoringv1.PodMonitorsKind:
		target = &monitoringv1.PodMonitor{}
	case monitoringv1.PrometheusRuleKind:
		target = &monitoringv1.PrometheusRule{}
	case monitoringv1.ServiceMonitorsKind:
		target = &monitoringv1.ServiceMonitor{}
	default:
		return "", fmt.Errorf("kind %q is not checked by this tool", meta.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, target); err != nil {
		return "", fmt.Errorf("%s: %w", meta.Kind, err)
	}
	if err := checkDurations(target); err != nil {
		return "", fmt.Errorf("%s: %w", meta.Kind, err)
	}
	return meta.Kind, nil
}

// checkDurations parses every duration the way Prometheus will: the Go types
// hold them as plain strings, and the CRD's pattern is not in the types.
func checkDurations(resource interface{}) error {
	var durations []string
	switch r := resource.(type) {
	case *monitoringv1.PodMonitor:
		for _, e := range r.Spec.PodMetricsEndpoints {
			durations = append(durations, string(e.Interval), string(e.ScrapeTimeout))
		}
	case *monitoringv1.ServiceMonitor:
		for _, e := range r.Spec.Endpoints {
			durations = append(durations, string(e.Interval), string(e.ScrapeTimeout))
		}
	case *monitoringv1.PrometheusRule:
		for _, g := range r.Spec.Groups {
			if g.Interval != nil {
				durations = append(durations, string(*g.Interval))
			}
			for _, rule := range g.Rules {
				if rule.For != nil {
					durations = append(durations, string(*rule.For))
				}
				if rule.KeepFiringFor != nil {
					durations = append(durations, string(*rule.KeepFiringFor))
				}
			}
		}
	}
	for _, d := range durations {
		if d == "" {
			continue
		}
		if _, err := model.ParseDuration(d); err != nil {
			return fmt.Errorf("duration %q: %w", d, err)
		}
	}
	return nil
}
