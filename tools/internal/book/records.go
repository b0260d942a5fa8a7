package book

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"softgpu/tools/internal/records"
)

// This file finds figures in records and implements the inline directives
// that print them: {{#value}}, {{#ratio}} and {{#meta}} ({{#table}} is in
// table.go, {{#chart}} in chart.go). All of them read
// book/records/NAME.json when the book is built; a number is never pasted
// into a chapter. Anything that does not resolve (record, stage, benchmark,
// unit, field) fails the build with the directive's file and line.

// recordSet loads records by name, once each.
type recordSet struct {
	dir     string // the book's records directory
	cache   map[string]*records.Record
	display func(path string) string // a path as messages show it
	used    map[string]bool          // records read since the page began (stale.go); nil outside a page
}

var recordNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func (rs *recordSet) get(name string) (*records.Record, error) {
	rec, err := rs.load(name)
	if err == nil && rs.used != nil {
		rs.used[name] = true
	}
	return rec, err
}

func (rs *recordSet) load(name string) (*records.Record, error) {
	if rec, ok := rs.cache[name]; ok {
		return rec, nil
	}
	if !recordNameRE.MatchString(name) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("bad record name %q: want the file name without .json, like stages", name)
	}
	p := filepath.Join(rs.dir, name+".json")
	if _, err := os.Stat(p); err != nil {
		shown := p
		if rs.display != nil {
			shown = rs.display(p)
		}
		return nil, fmt.Errorf("unknown record %q: %s does not exist (records: %s)", name, shown, rs.names())
	}
	rec, err := records.Load(p)
	if err != nil {
		return nil, err
	}
	// A value no run could produce fails the build, naming row and metric.
	if err := records.Validate(rec); err != nil {
		return nil, fmt.Errorf("record %s.json cannot be used: %w", name, err)
	}
	rs.cache[name] = rec
	return rec, nil
}

func (rs *recordSet) names() string {
	paths, _ := filepath.Glob(filepath.Join(rs.dir, "*.json"))
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".json"))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// limitsStage selects a record's Limits (the Baseline/... rows) in a
// directive's stage=.
const limitsStage = "limits"

// stageRows returns the rows of one stage: Rows whose stage matches, then
// Limits rows measured in that stage; stage=limits gives every Limits row.
func stageRows(rec *records.Record, stage string) []records.Row {
	var out []records.Row
	if stage == limitsStage {
		return append(out, rec.Limits...)
	}
	for _, r := range rec.Rows {
		if r.Stage == stage {
			out = append(out, r)
		}
	}
	for _, r := range rec.Limits {
		if r.Stage == stage {
			out = append(out, r)
		}
	}
	return out
}

func recordStages(rec *records.Record) string {
	seen := map[string]bool{}
	var out []string
	for _, rows := range [][]records.Row{rec.Rows, rec.Limits} {
		for _, r := range rows {
			if !seen[r.Stage] && r.Stage != "" {
				seen[r.Stage] = true
				out = append(out, r.Stage)
			}
		}
	}
	if len(rec.Limits) > 0 {
		out = append(out, limitsStage)
	}
	return strings.Join(out, ", ")
}

// benchRegexp compiles a bench= pattern, anchored at both ends.
func benchRegexp(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("bad bench= pattern %q: %v", pattern, err)
	}
	return re, nil
}

// matchRows returns the rows of stage whose benchmark matches re.
func matchRows(rec *records.Record, stage string, re *regexp.Regexp) ([]records.Row, error) {
	rows := stageRows(rec, stage)
	if len(rows) == 0 {
		return nil, fmt.Errorf("record %s has no stage %q (stages: %s)", rec.Name, stage, recordStages(rec))
	}
	var out []records.Row
	for _, r := range rows {
		if re.MatchString(r.Benchmark) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no benchmark of %s in record %s matches bench=%s (benchmarks: %s)",
			stage, rec.Name, strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$"), benchList(rows))
	}
	return out, nil
}

func benchList(rows []records.Row) string {
	var names []string
	for i, r := range rows {
		if i == 12 {
			names = append(names, fmt.Sprintf("… %d more", len(rows)-12))
			break
		}
		names = append(names, r.Benchmark)
	}
	return strings.Join(names, ", ")
}

// metricValue returns the row's stat for unit (see rowFigure).
func metricValue(row records.Row, unit, stat string) (float64, bool) {
	f, ok := rowFigure(row, unit, stat)
	return f.Value, ok
}

func rowUnits(rows []records.Row) string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rows {
		for _, m := range r.Metrics {
			if !seen[m.Unit] {
				seen[m.Unit] = true
				out = append(out, m.Unit)
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// checkUnit fails unless some row has unit.
func checkUnit(rows []records.Row, unit string) error {
	for _, r := range rows {
		if _, ok := metricValue(r, unit, "best"); ok {
			return nil
		}
	}
	return fmt.Errorf("unknown unit %q for these benchmarks (units: %s)", unit, rowUnits(rows))
}

// parseStat reads stat= for a table (allowBoth) or a chart: best, median,
// passN (what accepted pass N measured), or for a table both.
func parseStat(d directive, allowBoth bool) (string, error) {
	stat := d.arg("stat", defaultStat)
	if _, ok := passNumber(stat); ok || stat == "best" || stat == "median" || stat == "both" && allowBoth {
		return stat, nil
	}
	if allowBoth {
		return "", d.errorf("stat=%s: want best, median, both or passN (N = 1, 2, ...)", stat)
	}
	return "", d.errorf("stat=%s: want best, median or passN (N = 1, 2, ...)", stat)
}

// parseValueStat reads stat= for a single figure ({{#value}}, {{#ratio}},
// {{#claim}}): best, median, passN for what accepted pass N measured — the
// way to quote "in one run" from a record of several — or lowest and
// highest, the smallest and the largest value any pass measured, for a
// sentence that gives a row's range ("between 148 and 160 ns") without
// naming which passes, so that a re-take cannot leave it naming the wrong
// ones.
func parseValueStat(d directive) (string, error) {
	stat := d.arg("stat", defaultStat)
	if _, ok := passNumber(stat); ok || stat == "best" || stat == "median" || stat == "lowest" || stat == "highest" {
		return stat, nil
	}
	return "", d.errorf("stat=%s: want best, median, lowest, highest or passN (N = 1, 2, ...)", stat)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// findRow returns the row of stage (or of the limits) named bench.
func findRow(rec *records.Record, stage, bench string) (records.Row, bool) {
	for _, r := range stageRows(rec, stage) {
		if r.Benchmark == bench {
			return r, true
		}
	}
	return records.Row{}, false
}

// machineLabel is the short name of a record's machine, for headers.
func machineLabel(rec *records.Record) string {
	if rec.Machine.Label != "" {
		return rec.Machine.Label
	}
	if rec.Reference {
		return "reference VM"
	}
	return rec.Name
}

func shortDate(date string) string {
	if len(date) >= 10 {
		return date[:10]
	}
	return date
}

func shortCommit(c string) string {
	hash, dirty, _ := strings.Cut(c, "+")
	if len(hash) > 12 {
		hash = hash[:12]
	}
	if dirty != "" {
		return hash + "+" + dirty
	}
	return hash
}

// lookupValue finds one figure: record, stage, exact benchmark, unit, stat.
func (b *builder) lookupValue(recName, stage, bench, unit, stat string) (float64, *records.Record, error) {
	rec, err := b.records.get(recName)
	if err != nil {
		return 0, nil, err
	}
	rows := stageRows(rec, stage)
	if len(rows) == 0 {
		return 0, nil, fmt.Errorf("record %s has no stage %q (stages: %s)", rec.Name, stage, recordStages(rec))
	}
	row, found := findRow(rec, stage, bench)
	if !found {
		return 0, nil, fmt.Errorf("record %s has no benchmark %q in %s (benchmarks: %s)", rec.Name, bench, stage, benchList(rows))
	}
	if n, ok := passNumber(stat); ok {
		if err := checkPass(rec, row, n); err != nil {
			return 0, nil, err
		}
	}
	v, ok := metricValue(row, unit, stat)
	if !ok {
		return 0, nil, fmt.Errorf("unknown unit %q for %s %s in record %s (units: %s)", unit, stage, bench, rec.Name, rowUnits([]records.Row{row}))
	}
	return v, rec, nil
}

// passNumber reads stat=passN, N >= 1.
func passNumber(stat string) (int, bool) {
	digits, ok := strings.CutPrefix(stat, "pass")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 1
}

// checkPassRows checks stat=passN against every selected row of the
// record (a ref= record is another run: it shows its median instead).
func checkPassRows(d directive, sel selection, stat string) error {
	n, ok := passNumber(stat)
	if !ok {
		return nil
	}
	for _, r := range sel.all() {
		if err := checkPass(sel.rec, r, n); err != nil {
			return d.errorf("%v", err)
		}
	}
	return nil
}

// refStat is the statistic a ref= record shows beside stat: its passes
// are another run's, so a pass of this one has no counterpart there.
func refStat(stat string) string {
	if _, ok := passNumber(stat); ok {
		return "median"
	}
	return stat
}

// checkPass makes sure stat=passN names one accepted pass of rec, and that
// every metric of row has one value per accepted pass: only then is the
// N-th value of one row from the same run as the N-th value of another.
func checkPass(rec *records.Record, row records.Row, n int) error {
	passes := acceptedPasses(rec)
	if n > passes {
		return fmt.Errorf("stat=pass%d: record %s has %d accepted passes", n, rec.Name, passes)
	}
	for _, m := range row.Metrics {
		if len(m.Values) != passes {
			return fmt.Errorf("stat=pass%d: %s %s has %d values of %s for %d accepted passes, so its passes cannot be told apart", n, row.Stage, row.Benchmark, len(m.Values), m.Unit, passes)
		}
	}
	return nil
}

// acceptedPasses is the number of passes behind rec's figures: the passes
// whose canary was not rejected. (Settings.Passes is how many were wanted;
// a gate that gave up leaves fewer.) A record with no canary, such as a
// transcription, falls back to the passes wanted, or one.
func acceptedPasses(rec *records.Record) int {
	if len(rec.Canary) == 0 {
		return max(rec.Settings.Passes, 1)
	}
	n := 0
	for _, c := range rec.Canary {
		if !c.Rejected {
			n++
		}
	}
	return n
}

// value renders {{#value record= stage= bench= unit= [stat=]}}.
func (b *builder) value(d directive) (inlineValue, error) {
	if err := d.allow("record", "stage", "bench", "unit", "stat"); err != nil {
		return inlineValue{}, err
	}
	var args [4]string
	for i, k := range []string{"record", "stage", "bench", "unit"} {
		v, err := d.require(k)
		if err != nil {
			return inlineValue{}, err
		}
		args[i] = v
	}
	stat, err := parseValueStat(d)
	if err != nil {
		return inlineValue{}, err
	}
	v, rec, err := b.lookupValue(args[0], args[1], args[2], args[3], stat)
	if err != nil {
		return inlineValue{}, d.errorf("%v", err)
	}
	row, _ := findRow(rec, args[1], args[2])
	f, _ := rowFigure(row, args[3], stat)
	if err := b.noteShown(d, rec, args[1], args[2], args[3], stat, f.Value); err != nil {
		return inlineValue{}, err
	}
	how := f.rangeText(args[3])
	if rec.Transcribed {
		how = "transcribed from " + rec.Source // it has no passes to speak of
	}
	title := fmt.Sprintf("%s.json: %s %s, %s, %s (%s)", rec.Name, args[1], args[2], args[3], how, machineLabel(rec))
	out := inlineValue{Text: FormatValue(v, args[3]), Title: title, Class: "figure"}
	if recordDirty(rec) {
		out.Class += " dirty"
		out.Title += "; " + dirtyNote
	}
	b.markStale(&out, rec)
	return out, nil
}

// ratio renders {{#ratio record= a=STAGE:BENCH b=STAGE:BENCH unit= [stat=] [record_b=]}}.
func (b *builder) ratio(d directive) (inlineValue, error) {
	if err := d.allow("record", "a", "b", "unit", "stat", "record_b", "refused"); err != nil {
		return inlineValue{}, err
	}
	say := false // refused=say: print why the record gives no ratio rather than fail
	switch refused := d.arg("refused", "fail"); refused {
	case "say":
		say = true
	case "fail":
	default:
		return inlineValue{}, d.errorf("refused=%s: want say or fail", refused)
	}
	recA, unit, stat, err := operandArgs(d)
	if err != nil {
		return inlineValue{}, err
	}
	a, err := b.lookupOperand(d, "a", recA, unit, stat)
	if err != nil {
		return inlineValue{}, err
	}
	bo, err := b.lookupOperand(d, "b", d.arg("record_b", recA), unit, stat)
	if err != nil {
		return inlineValue{}, err
	}
	r, how, span, err := pairedRatio(a, bo, unit)
	if err != nil {
		var text string
		switch {
		case say && errors.Is(err, errUnplaced):
			text = "no ratio: no pass ran both rows in one placement"
		case say && errors.Is(err, errPassesDisagree):
			text = "no ratio: the passes disagree"
		default:
			return inlineValue{}, d.errorf("%v", err)
		}
		v := inlineValue{Text: text, Title: fmt.Sprintf("%s (%s.json) ÷ %s (%s.json): %v", a.describe(unit), a.rec.Name, bo.describe(unit), bo.rec.Name, err), Class: "figure refused"}
		b.markStale(&v, a.rec, bo.rec)
		return v, nil
	}
	title := fmt.Sprintf("%s (%s.json) ÷ %s (%s.json): %s", a.describe(unit), a.rec.Name, bo.describe(unit), bo.rec.Name, how)
	v := inlineValue{Text: formatRatio(r) + span, Title: title, Class: "figure"}
	if recordDirty(a.rec) || recordDirty(bo.rec) {
		v.Class += " dirty"
		v.Title += "; " + dirtyNote
	}
	b.markStale(&v, a.rec, bo.rec)
	b.markUnpaired(&v, a, bo)
	return v, nil
}

// metaFields lists what {{#meta field=}} can say about a record.
var metaFields = []string{"label", "machine", "cpu", "cores", "os", "go", "date", "commit", "command", "passes", "rejected", "rows_rerun", "threshold", "benchtime", "source", "name"}

// meta renders {{#meta record= field=}}.
func (b *builder) meta(d directive) (inlineValue, error) {
	if err := d.allow("record", "field"); err != nil {
		return inlineValue{}, err
	}
	name, err := d.require("record")
	if err != nil {
		return inlineValue{}, err
	}
	field, err := d.require("field")
	if err != nil {
		return inlineValue{}, err
	}
	rec, err := b.records.get(name)
	if err != nil {
		return inlineValue{}, d.errorf("%v", err)
	}
	m := rec.Machine
	var text string
	switch field {
	case "label":
		text = machineLabel(rec)
	case "machine":
		var parts []string
		if m.CPU != "" {
			parts = append(parts, cpuText(m))
		}
		if m.OS != "" {
			parts = append(parts, osText(m))
		}
		if m.Go != "" {
			parts = append(parts, m.Go)
		}
		text = machineLabel(rec)
		if len(parts) > 0 {
			text += " (" + strings.Join(parts, ", ") + ")"
		}
	case "cpu":
		text = cpuText(m)
	case "cores":
		text = strconv.Itoa(m.Cores)
	case "os":
		text = osText(m)
	case "go":
		text = m.Go
	case "date":
		text = shortDate(rec.Date)
	case "commit":
		text = shortCommit(rec.Commit)
		if recordDirty(rec) && !strings.Contains(text, "+dirty") {
			text += "+dirty"
		}
	case "command":
		if rec.Command == "" {
			return inlineValue{}, d.errorf("record %s has no command", rec.Name)
		}
		return inlineValue{Text: rec.Command, Title: rec.Name + ".json: command", Code: true}, nil
	case "passes":
		text = strconv.Itoa(acceptedPasses(rec))
	case "rejected":
		text = strconv.Itoa(rec.Rejected)
	case "rows_rerun":
		text = strconv.Itoa(rec.RowsRerun)
	case "threshold":
		text = strconv.FormatFloat(rec.Settings.Threshold*100, 'f', -1, 64) + " %"
	case "benchtime":
		text = rec.Settings.Benchtime
	case "source":
		text = rec.Source
	case "name":
		text = rec.Name + ".json"
	default:
		return inlineValue{}, d.errorf("unknown field %q (fields: %s)", field, strings.Join(metaFields, ", "))
	}
	if text == "" {
		return inlineValue{}, d.errorf("record %s has no %s", rec.Name, field)
	}
	return inlineValue{Text: text, Title: rec.Name + ".json: " + field, Class: "meta"}, nil
}

func cpuText(m records.Machine) string {
	if m.Cores > 0 {
		return fmt.Sprintf("%s, %d cores", m.CPU, m.Cores)
	}
	return m.CPU
}

func osText(m records.Machine) string {
	if m.Kernel != "" {
		return m.OS + " " + m.Kernel
	}
	return m.OS
}

// selection is what {{#table}} and {{#chart}} both start from: record= and
// its optional comparison record ref=, the stages named by stage=, and in
// each stage the rows whose benchmark matches bench= (default: all).
type selection struct {
	rec, ref *records.Record
	stages   []string
	rows     [][]records.Row // rows[i] are stages[i]'s matching rows, in record order
}

// all returns every selected row, first stage first.
func (s selection) all() []records.Row {
	var all []records.Row
	for _, rows := range s.rows {
		all = append(all, rows...)
	}
	return all
}

// selectRows reads record=, ref=, stage= and bench= and finds the rows. A
// stage with no matching benchmark is an error: a table or chart of nothing
// is a typo, not a figure.
func (b *builder) selectRows(d directive) (selection, error) {
	name, err := d.require("record")
	if err != nil {
		return selection{}, err
	}
	stageArg, err := d.require("stage")
	if err != nil {
		return selection{}, err
	}
	var sel selection
	if sel.rec, err = b.records.get(name); err != nil {
		return selection{}, d.errorf("%v", err)
	}
	if refName := d.arg("ref", ""); refName != "" {
		if sel.ref, err = b.records.get(refName); err != nil {
			return selection{}, d.errorf("ref=: %v", err)
		}
	}
	re, err := benchRegexp(d.arg("bench", ".*"))
	if err != nil {
		return selection{}, d.errorf("%v", err)
	}
	if sel.stages = splitList(stageArg); len(sel.stages) == 0 {
		return selection{}, d.errorf("empty stage=")
	}
	for _, st := range sel.stages {
		rows, err := matchRows(sel.rec, st, re)
		if err != nil {
			return selection{}, d.errorf("%v", err)
		}
		sel.rows = append(sel.rows, rows)
	}
	return sel, nil
}
