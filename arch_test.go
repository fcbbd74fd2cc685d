package raftq_test

import (
	"errors"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/raftq/raftq/"

// allowed lists, per package prefix, the raftq packages it may import
// (its own subpackages and internal/ are always allowed). It encodes the
// layout table in DESIGN.md; departures are explained there.
var allowed = map[string][]string{
	"raftgroup":       {},
	"partition":       {"raftgroup"},
	"transport/peer":  {"raftgroup"},
	"auth":            {},
	"transport/kafka": {"auth"},
	"coordinator":     {"raftgroup", "partition", "auth"},
	"isr":             {"partition", "transport/peer", "coordinator", "raftgroup"},
	"broker":          {"raftgroup", "partition", "transport", "coordinator", "isr", "auth"},
	"sim":             {"raftgroup", "partition", "coordinator", "isr", "broker"},
	"chaos":           {},
	"jepsen":          {"chaos"},
	"console":         {"broker"},
	"cmd":             {"*"},
}

func TestArchitecture_ImportRules(t *testing.T) {
	for pkg, imports := range projectImports(t) {
		rules, ok := ruleFor(pkg)
		if !ok {
			continue
		}
		for _, imp := range imports {
			if !permitted(pkg, imp, rules) {
				t.Errorf("%s imports %s, which DESIGN.md's layout forbids", pkg, imp)
			}
		}
	}
}

func ruleFor(pkg string) ([]string, bool) {
	best := ""
	for prefix := range allowed {
		if within(pkg, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return nil, false
	}
	return allowed[best], true
}

func permitted(pkg, imp string, rules []string) bool {
	if within(imp, "internal") || within(imp, topOf(pkg)) {
		return true
	}
	for _, r := range rules {
		if r == "*" {
			return !within(imp, "cmd")
		}
		if within(imp, r) {
			return true
		}
	}
	return false
}

func topOf(pkg string) string {
	for prefix := range allowed {
		if within(pkg, prefix) && strings.Count(prefix, "/") == 1 {
			return prefix
		}
	}
	return strings.SplitN(pkg, "/", 2)[0]
}

func within(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// projectImports maps each package directory (relative to the module root)
// to the raftq packages its non-test files import.
func projectImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	eachPackage(t, func(dir string, p *build.Package) {
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				out[dir] = append(out[dir], strings.TrimPrefix(imp, module))
			}
		}
	})
	return out
}

// eachPackage calls f for every directory of the module that holds a
// package (not only tests), by its slash path relative to the root.
func eachPackage(t *testing.T, f func(dir string, p *build.Package)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		var none *build.NoGoError
		if errors.As(err, &none) || err == nil && len(p.GoFiles) == 0 {
			return nil // no package here, or only tests
		}
		if err != nil {
			return err
		}
		f(filepath.ToSlash(path), p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestArchitecture_RulesCatchViolations(t *testing.T) {
	cases := []struct {
		pkg, imp string
		ok       bool
	}{
		{"raftgroup", "partition", false},
		{"partition", "raftgroup", true},
		{"broker", "cmd/raftq", false},
		{"cmd/raftq", "jepsen", true},
		{"broker", "jepsen", false},
		{"broker", "chaos", false},
		{"jepsen", "chaos", true},
		{"transport/kafka", "transport/kafka/internal/x", true},
		{"raftgroup", "internal/logging", true},
	}
	for _, c := range cases {
		rules, _ := ruleFor(c.pkg)
		if got := permitted(c.pkg, c.imp, rules); got != c.ok {
			t.Errorf("permitted(%s -> %s) = %v, want %v", c.pkg, c.imp, got, c.ok)
		}
	}
}

// raftFiles are the broker files that may see raft itself: the raft
// replication adapter and the node's wiring and control plane. Every
// other broker file, the Kafka API files above all, sees a partition's
// replication only through broker/replication.go's interfaces.
var raftFiles = map[string]bool{
	"replication_raft.go": true, // the raft mode's adapter
	"node.go":             true, // the raft host and group 0
	"config.go":           true, // raftgroup.FsyncPolicy
	"walsize.go":          true, // etcd's process-wide WAL segment size
	"metrics.go":          true, // the host's WAL metrics
}

// raftImports are the import paths that raftFiles alone may use.
var raftImports = []string{module + "raftgroup", "go.etcd.io/raft/"}

func TestArchitecture_BrokerAPIsSeeNoRaft(t *testing.T) {
	files, err := filepath.Glob("broker/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range forbiddenRaftImports(t, file, src) {
			t.Errorf("%s imports %s: broker sees raft only in %v (arch_test.go raftFiles)", file, imp, slices.Sorted(maps.Keys(raftFiles)))
		}
	}
}

// forbiddenRaftImports lists the raft imports of a broker file that is
// not one of raftFiles.
func forbiddenRaftImports(t *testing.T, file string, src []byte) []string {
	t.Helper()
	if raftFiles[filepath.Base(file)] {
		return nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, is := range f.Imports {
		path := strings.Trim(is.Path.Value, `"`)
		for _, r := range raftImports {
			if path == r || strings.HasPrefix(path, r) {
				out = append(out, path)
			}
		}
	}
	return out
}

func TestArchitecture_BrokerRaftRuleCatchesViolations(t *testing.T) {
	src := func(imp string) []byte { return []byte("package broker\nimport _ \"" + imp + "\"\n") }
	cases := []struct {
		file, imp string
		bad       bool
	}{
		{"broker/produce.go", module + "raftgroup", true},
		{"broker/fetch.go", "go.etcd.io/raft/v3/raftpb", true},
		{"broker/fetch.go", module + "partition", false},
		{"broker/replication_raft.go", module + "raftgroup", false},
	}
	for _, c := range cases {
		if got := len(forbiddenRaftImports(t, c.file, src(c.imp))) > 0; got != c.bad {
			t.Errorf("%s importing %s: flagged %v, want %v", c.file, c.imp, got, c.bad)
		}
	}
}

// Every package keeps its package comment in a doc.go (STYLE.md), where a
// reader looks first.
func TestArchitecture_EveryPackageHasDocGo(t *testing.T) {
	eachPackage(t, func(dir string, _ *build.Package) {
		if !hasPackageComment(filepath.Join(dir, "doc.go")) {
			t.Errorf("%s: no doc.go with the package comment", dir)
		}
	})
}

func hasPackageComment(file string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.PackageClauseOnly|parser.ParseComments)
	return err == nil && f.Doc != nil
}
