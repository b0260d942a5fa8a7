package trace

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svgText is what an SVG holds, decoded with encoding/xml: every text
// element's content and every <title>'s, and how many rects and lines.
type svgText struct {
	texts, titles []string
	rects, lines  int
}

// decodeSVG parses s as XML, failing the test if it is not well formed.
func decodeSVG(t *testing.T, s string) svgText {
	t.Helper()
	decoder := xml.NewDecoder(strings.NewReader(s))
	var out svgText
	var stack []string
	for {
		token, err := decoder.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML\n%s", s)
		switch token := token.(type) {
		case xml.StartElement:
			stack = append(stack, token.Name.Local)
			switch token.Name.Local {
			case "rect":
				out.rects++
			case "line":
				out.lines++
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				continue
			}
			switch stack[len(stack)-1] {
			case "text":
				out.texts = append(out.texts, string(token))
			case "title":
				out.titles = append(out.titles, string(token))
			}
		}
	}
	require.Equal(t, 0, len(stack), "the SVG leaves %v open", stack)
	return out
}

func render(t *testing.T, tr *Trace, opt TimelineOptions) string {
	t.Helper()
	svg, err := RenderSVG(tr, opt)
	require.NoError(t, err, "RenderSVG(%+v)", opt)
	return svg
}

func TestRenderSVGLanes(t *testing.T) {
	tests := []struct {
		file  string
		lanes []string
	}{
		{"good/stage7.json", []string{"engine compute", "engine copy", "channel 0", "channel 1", "driver"}},
		{"good/later-stages.json", []string{"engine compute", "channel 0", "driver", "fault buffer"}},
		{"good/array.json", []string{"engine copy"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tr := load(t, tt.file)
			svg := decodeSVG(t, render(t, tr, TimelineOptions{Title: "A title", Caption: "A caption"}))
			// Lane labels are the texts that name tracks, in lane order.
			var lanes []string
			for _, text := range svg.texts {
				if slices.Contains(tt.lanes, text) {
					lanes = append(lanes, text)
				}
			}
			if !slices.Equal(lanes, tt.lanes) {
				t.Errorf("lane labels %q; want %q", lanes, tt.lanes)
			}
			for _, want := range []string{"A title", "A caption"} {
				if !slices.Contains(svg.texts, want) {
					t.Errorf("the SVG lacks the text %q; texts: %q", want, svg.texts)
				}
			}
		})
	}
}

// TestRenderSVGStage6: from stage 6 a trace names all 128 channels; only
// those with events get a lane, engines and the driver always do. A
// preempted slice is drawn as one, not as a failed command.
func TestRenderSVGStage6(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"traceEvents":[`)
	b.WriteString(`{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"engine compute"}},`)
	b.WriteString(`{"ph":"M","name":"thread_name","pid":1,"tid":10,"args":{"name":"driver"}}`)
	for c := range 128 {
		fmt.Fprintf(&b, `,{"ph":"M","name":"thread_name","pid":1,"tid":%d,"args":{"name":"channel %d"}}`, 100+c, c)
	}
	b.WriteString(`,{"ph":"i","s":"t","name":"doorbell","pid":1,"tid":105,"ts":1}`)
	b.WriteString(`,{"ph":"X","cat":"command","name":"COPY (preempted)","pid":1,"tid":1,"ts":2,"dur":1,"args":{"status":"preempted"}}`)
	b.WriteString(`,{"ph":"X","cat":"command","name":"FILL","pid":1,"tid":1,"ts":3,"dur":1,"args":{"status":"ok"}}]}`)
	tr, err := Parse([]byte(b.String()))
	require.NoError(t, err)
	s := render(t, tr, TimelineOptions{})
	if !strings.Contains(s, `<rect class="sgt-preempted"`) || strings.Contains(s, `class="sgt-err"`) {
		t.Errorf("the preempted slice is not drawn as one (sgt-preempted), or something is drawn as failed:\n%s", s)
	}
	svg := decodeSVG(t, s)
	if !slices.Contains(svg.texts, "command preempted") || slices.Contains(svg.texts, "command failed") {
		t.Errorf("the legend should say \"command preempted\" and not \"command failed\"; texts: %q", svg.texts)
	}
	var lanes []string
	for _, text := range svg.texts {
		if text == "driver" || strings.HasPrefix(text, "engine ") || strings.HasPrefix(text, "channel ") {
			lanes = append(lanes, text)
		}
	}
	if want := []string{"engine compute", "channel 5", "driver"}; !slices.Equal(lanes, want) {
		t.Errorf("lane labels %q; want %q", lanes, want)
	}
}

func TestRenderSVGDeterministic(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "good", "later-stages.json"))
	require.NoError(t, err)
	var first string
	for i := range 20 {
		// Parse afresh each time, so map order inside the trace (args)
		// differs from run to run.
		tr, err := Parse(data)
		require.NoError(t, err)
		svg := render(t, tr, TimelineOptions{Title: "later stages"})
		if i == 0 {
			first = svg
		} else if svg != first {
			t.Fatalf("render %d differs from render 0", i)
		}
	}
}

func TestRenderSVGContent(t *testing.T) {
	tr := load(t, "good/stage7.json")
	s := render(t, tr, TimelineOptions{Title: "stage 7"})
	svg := decodeSVG(t, s)
	for _, want := range []string{
		`viewBox="0 0 624 `,
		`font-size="18"`,
		"@media (prefers-color-scheme: dark)",
		`<rect class="sgt-err"`,   // COPY failed
		`<rect class="sgt-sleep"`, // sleeps
		`<line class="sgt-doorbell"`,
		`<line class="sgt-irq"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	if strings.Contains(s, " id=") {
		t.Errorf("the SVG has an id attribute; two timelines in one page would clash")
	}
	for _, want := range []string{"command", "command failed", "asleep", "doorbell", "interrupt"} {
		if !slices.Contains(svg.texts, want) {
			t.Errorf("the legend lacks %q; texts: %q", want, svg.texts)
		}
	}
	if slices.Contains(svg.texts, "scheduling") {
		t.Errorf("the legend shows scheduling, which this trace does not have")
	}
	wantTitle := "COPY (command) on engine copy at 1.200 µs for 500 ns: channel=1 engine=copy seq=3 size=4096 status=bad address"
	if !slices.Contains(svg.titles, wantTitle) {
		t.Errorf("no tooltip %q among %q", wantTitle, svg.titles)
	}
	// Axis: 215.05 µs in at most five steps of 1, 2 or 5 × 10^k: 50 µs.
	for _, want := range []string{"0", "50 µs", "100 µs", "150 µs", "200 µs"} {
		if !slices.Contains(svg.texts, want) {
			t.Errorf("the axis lacks the tick %q; texts %q", want, svg.texts)
		}
	}
}

// TestRenderSVGTextSize checks that no text is smaller than 11 px when
// the figure is drawn 390 px wide, a phone's width.
func TestRenderSVGTextSize(t *testing.T) {
	s := render(t, load(t, "good/stage7.json"), TimelineOptions{Title: "t", Caption: "c"})
	width, _ := strconv.ParseFloat(regexp.MustCompile(`viewBox="0 0 ([0-9.]+) `).FindStringSubmatch(s)[1], 64)
	for _, m := range regexp.MustCompile(`font-size="([0-9.]+)"`).FindAllStringSubmatch(s, -1) {
		if size, _ := strconv.ParseFloat(m[1], 64); size*390/width < 11 {
			t.Errorf("font-size %s in a %v-unit viewBox is %.2f px at 390 px; want at least 11", m[1], width, size*390/width)
		}
	}
}

func TestRenderSVGEscapes(t *testing.T) {
	tr := load(t, "good/escape.json")
	s := render(t, tr, TimelineOptions{Title: `<b>"bold" & 'it'</b>`, Caption: "a < b"})
	for _, raw := range []string{"<b>", "<compute>", "FILL<&>", "\u0007"} {
		if strings.Contains(s, raw) {
			t.Errorf("the SVG holds %q unescaped", raw)
		}
	}
	svg := decodeSVG(t, s) // well formed despite the names
	for _, want := range []string{`<b>"bold" & 'it'</b>`, "engine <compute> & 'co'", `channel "0"`, "a < b"} {
		if !slices.Contains(svg.texts, want) {
			t.Errorf("texts lack %q after decoding: %q", want, svg.texts)
		}
	}
	wantTitle := `FILL<&> (command) on engine <compute> & 'co' at 1.000 µs for 2.00 µs: status=err <"bad"> & co`
	if !slices.Contains(svg.titles, wantTitle) {
		t.Errorf("no tooltip %q among %q", wantTitle, svg.titles)
	}
}

// manyCommands is a trace of n 40 ns commands on one engine, one every
// 100 ns, with a doorbell before each.
func manyCommands(t *testing.T, n int) *Trace {
	t.Helper()
	events := []string{`{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"engine compute"}}`}
	for i := range n {
		ts := float64(i) * 0.1
		events = append(events,
			fmt.Sprintf(`{"ph":"i","s":"t","cat":"doorbell","name":"doorbell","pid":1,"tid":100,"ts":%.3f}`, ts),
			fmt.Sprintf(`{"ph":"X","cat":"command","name":"FILL","pid":1,"tid":1,"ts":%.3f,"dur":0.040,"args":{"seq":%d}}`, ts+0.01, i))
	}
	tr, err := Parse([]byte(`{"traceEvents":[` + strings.Join(events, ",\n") + `]}`))
	require.NoError(t, err)
	return tr
}

func TestRenderSVGMerges(t *testing.T) {
	tr := manyCommands(t, 10000) // 1 ms: a command is 0.025 units wide
	s := render(t, tr, TimelineOptions{})
	svg := decodeSVG(t, s)
	// One merged rectangle per engine lane plus the band, background and
	// legend swatch: far fewer than 10000.
	if svg.rects > 20 {
		t.Errorf("10000 narrow commands drew %d rects; want them merged", svg.rects)
	}
	if len(s) > 20000 {
		t.Errorf("the SVG of 10000 narrow commands is %d bytes; want under 20000", len(s))
	}
	merged := 0
	for _, title := range svg.titles {
		if n, ok := strings.CutPrefix(title, ""); ok && strings.Contains(n, " events on engine compute") {
			count, _ := strconv.Atoi(strings.Fields(n)[0])
			merged += count
			if !strings.Contains(n, "FILL ×") {
				t.Errorf("merged tooltip %q does not count by name", n)
			}
		}
	}
	assert.Equal(t, 10000, merged, "merged tooltips count %d commands", merged)
	// The commands fill 40% of their run: the rectangle says so.
	if !strings.Contains(s, `fill-opacity="0.40"`) {
		t.Errorf("the merged rectangle's opacity is not the 0.40 its commands fill")
	}

	// Zoomed in to 2 µs, the same commands are each 12 units wide: one
	// rectangle each.
	zoomed := decodeSVG(t, render(t, tr, TimelineOptions{From: 100, To: 102}))
	commands := 0
	for _, title := range zoomed.titles {
		if strings.HasPrefix(title, "FILL (command) on engine compute") {
			commands++
		}
	}
	if commands != 20 { // 100.01 to 101.91; 99.91 ends at 99.95 and 102.01 starts after the window
		t.Errorf("a 2 µs window drew %d single commands; want 20", commands)
	}
}

func TestTimelineWindow(t *testing.T) {
	tr := load(t, "good/stage7.json") // events from 0 to 215.050 µs
	tests := []struct {
		name     string
		opt      TimelineOptions
		from, to time.Duration
		err      string
	}{
		{"whole trace", TimelineOptions{}, 0, 215050, ""},
		{"from", TimelineOptions{From: 100}, 100000, 215050, ""},
		{"from and to", TimelineOptions{From: 1, To: 2.5}, 1000, 2500, ""},
		{"first", TimelineOptions{First: 3}, 0, 3000, ""},
		{"after the end", TimelineOptions{From: 300}, 300000, 301000, ""},
		{"negative", TimelineOptions{From: -1}, 0, 0, "none negative"},
		{"first with from", TimelineOptions{First: 3, From: 1}, 0, 0, "one or the other"},
		{"empty", TimelineOptions{From: 5, To: 5}, 0, 0, "is empty"},
		{"backwards", TimelineOptions{From: 5, To: 4}, 0, 0, "is empty"},
		{"from too late", TimelineOptions{From: 1e16}, 0, 0, "From 1e+16: want a finite number of µs, at most 1e+12"},
		{"to infinite", TimelineOptions{To: math.Inf(1)}, 0, 0, "To +Inf: want a finite number of µs"},
		{"first too long", TimelineOptions{First: 1e300}, 0, 0, "First 1e+300: want a finite number of µs"},
		{"from NaN", TimelineOptions{From: math.NaN()}, 0, 0, "From NaN: want a finite number of µs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to, err := tt.opt.window(tr)
			if tt.err != "" {
				if !errors.Is(err, ErrWindow) || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("window(%+v) = %v; want ErrWindow saying %q", tt.opt, err, tt.err)
				}
				_, err := RenderSVG(tr, tt.opt)
				assert.ErrorIs(t, err, ErrWindow, "RenderSVG(%+v)", tt.opt)
				return
			}
			if err != nil || from != tt.from || to != tt.to {
				t.Errorf("window(%+v) = %v, %v, %v; want %v, %v", tt.opt, from, to, err, tt.from, tt.to)
			}
		})
	}
	for _, w := range []struct {
		opt  TimelineOptions
		want bool
	}{
		{TimelineOptions{}, true},
		{TimelineOptions{From: 100, To: 101}, true},
		{TimelineOptions{From: 300}, false},              // after the end
		{TimelineOptions{From: 215.051, To: 216}, false}, // just after the last event ends
	} {
		n, err := w.opt.EventsShown(tr)
		require.NoError(t, err)
		assert.Equal(t, w.want, n > 0, "EventsShown(%+v) = %d", w.opt, n)
	}
	empty, err := Parse([]byte(`{"traceEvents":[]}`))
	require.NoError(t, err)
	_, err = RenderSVG(empty, TimelineOptions{})
	assert.ErrorIs(t, err, ErrWindow, "RenderSVG(no events)")
	_, err = RenderSVG(empty, TimelineOptions{From: 1, To: 2})
	assert.NoError(t, err, "RenderSVG(no events, From 1, To 2); want an empty timeline")
}

func TestAxisTicks(t *testing.T) {
	tests := []struct {
		length time.Duration
		want   []string
	}{
		{3, []string{"0", "1 ns", "2 ns", "3 ns"}},
		{215050, []string{"0", "50 µs", "100 µs", "150 µs", "200 µs"}},
		{1100, []string{"0", "0.2 µs", "0.4 µs", "0.6 µs", "0.8 µs", "1 µs"}},
		{2500, []string{"0", "0.5 µs", "1 µs", "1.5 µs", "2 µs", "2.5 µs"}},
		{3 * time.Millisecond, []string{"0", "1 ms", "2 ms", "3 ms"}},
		{12 * time.Second, []string{"0", "5 s", "10 s"}},
	}
	for _, tt := range tests {
		ticks, unit := axisTicks(tt.length)
		var got []string
		for _, tick := range ticks {
			got = append(got, formatTick(tick, unit))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("axisTicks(%v) = %q; want %q", tt.length, got, tt.want)
		}
	}
}

func TestMetaCaption(t *testing.T) {
	m := &Meta{Command: "go run ./tools/cmd/trace make -stage stage7-idle -bench X -name gap", Commit: "0123456789abcdef0123+dirty"}
	want := "Trace book/traces/gap.json, made by go run ./tools/cmd/trace make -stage stage7-idle -bench X -name gap at commit 0123456789ab (with uncommitted changes)."
	assert.Equal(t, want, m.Caption("book/traces/gap.json"), "Caption")
	assert.Equal(t, "book/traces/gap.meta.json", MetaPath("book/traces/gap.json"), "MetaPath")
}
