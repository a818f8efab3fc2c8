package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

// The rules file passes the checks promtool check rules makes (it parses,
// every expression is valid PromQL, no two rules are the same rule), and
// the alerts pass their unit tests, in the file promtool test rules reads:
// each scenario (a retry storm, a budget exhaustion, an outage with the
// circuit open, a dedup failure, a consumer dead-lettering) fires its
// alert and no other.
//
// The unit tests run here on the Prometheus packages promtool runs them on
// (the rule manager, the PromQL engine and its test loader, at the version
// go.mod pins) rather than through a promtool built from source: that build
// pulls in Kubernetes' client and took as long as the rest of this
// module's tests on a fresh machine. The file stays promtool's format, so
// `promtool test rules deploy/prometheus/retryhttp-rules.test.yml` runs it
// too.
func TestAlertRules(t *testing.T) {
	const rulesPath = "prometheus/retryhttp-rules.yml"
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(rulesPath, false, model.UTF8Validation, p, nil)
	for _, err := range errs {
		t.Errorf("%s: %v", rulesPath, err)
	}
	if groups == nil {
		t.FailNow()
	}
	for _, err := range duplicateRules(groups) {
		t.Errorf("%s: %v", rulesPath, err)
	}

	tf, err := readRuleTests("prometheus/retryhttp-rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(tf.Tests) == 0 {
		t.Fatal("the unit test file holds no tests")
	}
	for i, g := range tf.Tests {
		t.Run(fmt.Sprintf("group%d", i+1), func(t *testing.T) {
			for _, err := range g.run(p, time.Duration(tf.EvaluationInterval), tf.RuleFiles) {
				t.Error(err)
			}
		})
	}
}

// ruleTests is promtool's unit test file, the part of its format these
// tests use; a field it does not know is an error, so that a test the
// file holds is never skipped silently.
type ruleTests struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []ruleTestGroup
}

type ruleTestGroup struct {
	Interval    model.Duration
	InputSeries []struct{ Series, Values string } `yaml:"input_series"`
	AlertTests  []alertTest                       `yaml:"alert_rule_test"`
}

type alertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string
	ExpAlerts []struct {
		ExpLabels      map[string]string `yaml:"exp_labels"`
		ExpAnnotations map[string]string `yaml:"exp_annotations"`
	} `yaml:"exp_alerts"`
}

// readRuleTests reads a unit test file; its rule files are named relative
// to it, as promtool names them.
func readRuleTests(path string) (*ruleTests, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var tf ruleTests
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if tf.EvaluationInterval == 0 {
		tf.EvaluationInterval = model.Duration(time.Minute) // promtool's default
	}
	for i, f := range tf.RuleFiles {
		tf.RuleFiles[i] = filepath.Join(filepath.Dir(path), f)
	}
	return &tf, nil
}

// run loads the group's series, evaluates the rule files every interval
// from time 0 to the last eval_time, and returns how the firing alerts
// differ from those expected at each eval_time. An eval_time between two
// evaluations is checked against the earlier one, as promtool does.
func (g *ruleTestGroup) run(p parser.Parser, every time.Duration, files []string) []error {
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", g.Interval)
	for _, s := range g.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		return []error{err}
	}
	defer suite.Close()
	suite.SubqueryInterval = every
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		Appendable: suite.Storage(),
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Parser:     p,
	})
	loaded, errs := m.LoadGroups(time.Duration(g.Interval), labels.EmptyLabels(), "", nil, false, files...)
	if errs != nil {
		return errs
	}
	var groups []*rules.Group
	for _, rg := range loaded {
		groups = append(groups, rg)
		for _, r := range rg.Rules() {
			if a, ok := r.(*rules.AlertingRule); ok {
				a.SetRestored(true) // as if it had run before: its for clause counts from the first evaluation
			}
		}
	}
	slices.SortFunc(groups, func(a, b *rules.Group) int { return strings.Compare(a.Name(), b.Name()) })

	tests := slices.Clone(g.AlertTests)
	slices.SortStableFunc(tests, func(a, b alertTest) int { return int(a.EvalTime - b.EvalTime) })
	if len(tests) == 0 {
		return nil
	}
	start := time.Unix(0, 0).UTC()
	last := time.Duration(tests[len(tests)-1].EvalTime)
	var out []error
	for at := time.Duration(0); at <= last; at += every {
		ts := start.Add(at)
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, err)
				return
			}
			for _, rg := range groups {
				rg.Eval(suite.Context(), ts)
				for _, r := range rg.Rules() {
					if err := r.LastError(); err != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule %s at %s: %w", r.Name(), at, err))
					}
				}
			}
		})
		if len(evalErrs) > 0 {
			return append(out, evalErrs...)
		}
		for len(tests) > 0 && time.Duration(tests[0].EvalTime) < at+every {
			out = append(out, tests[0].check(groups)...)
			tests = tests[1:]
		}
	}
	return out
}

// check compares the alerts named tc.Alertname firing now in groups with
// those tc expects, labels (with alertname) and annotations alike.
func (tc *alertTest) check(groups []*rules.Group) []error {
	var got, want []string
	found := false
	for _, rg := range groups {
		for _, r := range rg.Rules() {
			a, ok := r.(*rules.AlertingRule)
			if !ok || a.Name() != tc.Alertname {
				continue
			}
			found = true
			for _, al := range a.ActiveAlerts() {
				if al.State == rules.StateFiring {
					got = append(got, al.Labels.String()+" "+al.Annotations.String())
				}
			}
		}
	}
	if !found {
		return []error{fmt.Errorf("at %s: no alerting rule %s", tc.EvalTime, tc.Alertname)}
	}
	for _, e := range tc.ExpAlerts {
		l := map[string]string{labels.AlertName: tc.Alertname}
		for k, v := range e.ExpLabels {
			l[k] = v
		}
		want = append(want, labels.FromMap(l).String()+" "+labels.FromMap(e.ExpAnnotations).String())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return []error{fmt.Errorf("at %s, alert %s:\n got  %q\n want %q", tc.EvalTime, tc.Alertname, got, want)}
	}
	return nil
}

// duplicateRules returns an error for each rule that repeats another in
// its group: the same name and the same labels, which promtool check rules
// reports, since the second overwrites the first's series.
func duplicateRules(rgs *rulefmt.RuleGroups) []error {
	var errs []error
	for _, g := range rgs.Groups {
		seen := map[string]bool{}
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			id := name + " " + labels.FromMap(r.Labels).String()
			if seen[id] {
				errs = append(errs, fmt.Errorf("group %s: rule %s repeated with the same labels", g.Name, name))
			}
			seen[id] = true
		}
	}
	return errs
}
