package llm

import "github.com/kilnworks/kiln/runtime"

// SetupForTest runs the extension's Setup with explicit flag values and a
// fake environment.
func SetupForTest(h *runtime.Host, unix, httpURL, bearerFile string, env map[string]string) error {
	return setup(h, config{unix: unix, httpURL: httpURL, bearerFile: bearerFile}, func(k string) string { return env[k] })
}

// SetupRouteAll is SetupForTest with --intel-route-all.
func SetupRouteAll(h *runtime.Host, unix string) error {
	return setup(h, config{unix: unix, routeAll: true}, func(string) string { return "" })
}
