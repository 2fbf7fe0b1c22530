//go:build monitoring

package main

import monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

func init() {
	extra["monitoring.coreos.com/v1/ServiceMonitor"] = func() any { return &monitoringv1.ServiceMonitor{} }
	delete(elsewhere, "monitoring.coreos.com/v1/ServiceMonitor")
	extra["monitoring.coreos.com/v1/PrometheusRule"] = func() any { return &monitoringv1.PrometheusRule{} }
	delete(elsewhere, "monitoring.coreos.com/v1/PrometheusRule")
}
