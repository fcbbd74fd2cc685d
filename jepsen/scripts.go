package jepsen

import (
	"embed"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/raftq/raftq/chaos"
)

// shippedScripts are the fault scripts of schedules/ (see its README).
//
//go:embed schedules/*.json
var shippedScripts embed.FS

// ShippedScripts lists the names of the scripts in schedules/.
func ShippedScripts() []string {
	entries, _ := shippedScripts.ReadDir("schedules")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(out)
	return out
}

// LoadScript reads the fault script at path, or, when no such file
// exists, the shipped script of that name (e.g. "last-replica-standing").
func LoadScript(p string) (chaos.Script, error) {
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) && !strings.ContainsRune(p, os.PathSeparator) {
		name := strings.TrimSuffix(p, ".json")
		if b2, err2 := shippedScripts.ReadFile(path.Join("schedules", name+".json")); err2 == nil {
			b, err = b2, nil
		} else {
			err = fmt.Errorf("%w (nor is it a shipped script: %s)", err, strings.Join(ShippedScripts(), ", "))
		}
	}
	if err != nil {
		return chaos.Script{}, fmt.Errorf("jepsen: schedule %s: %w", p, err)
	}
	s, err := chaos.ParseScript(b)
	if err != nil {
		return chaos.Script{}, fmt.Errorf("jepsen: schedule %s: %w", p, err)
	}
	return s, nil
}
