// Package promreg registers Prometheus collectors so that two
// constructors given the same registry share one set of collectors
// instead of failing: the modules' metrics constructors may be called more
// than once per process. The root module keeps its own copy
// (internal/promreg), since it requires nothing but uuid and the
// Prometheus client.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c, or returns the collector of the same description
// already registered. A different collector under the same name is an
// error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("a different collector is registered under the same name: %w", err)
	}
	return c, err
}
