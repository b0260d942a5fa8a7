// Package book renders softgpu's book: the Markdown chapters under book/,
// listed in book/SUMMARY.md, to a static site of one page per chapter, a
// page per source file of every stage, and print.html, in the manner of
// mdBook. tools/cmd/book is its command; tools/cmd/bookcheck checks the
// result in a headless Chromium.
//
// The flow of one build:
//
//	SUMMARY.md ──ParseSummary──▶ chapters in reading order, lettered   (summary.go)
//	chapter.md ──expandDirectives──▶ Markdown with placeholders        (directive.go)
//	    {{#include}}  real stage files, as numbered listings            (include.go, highlight.go)
//	    {{#diff}}     package stages' normalised diffs                  (diff.go)
//	    {{#table}} {{#chart}}  a record's benchmarks                    (table.go, chart.go, svg.go, marks.go)
//	    {{#value}} {{#ratio}} {{#meta}} {{#claim}}  figures and facts   (records.go, claim.go, stats.go)
//	    {{#records-appendix}}  every record and how to re-make it       (appendix.go)
//	    {{#diagram}} {{#timeline}}  SVG drawn by hand, or from a trace  (diagram.go, timeline.go)
//	──goldmark──▶ HTML; heading ids, .md links → .html, tables framed  (markdown.go)
//	──page template──▶ sidebar with search, "On this page", prev/next  (page.go, templates/page.html)
//	stage directories ──▶ src/STAGE/PATH.html with line anchors         (source.go)
//	every chapter ──▶ search-index.js                                  (search.go)
//	every page ──CheckLinks──▶ each internal href and #fragment        (linkcheck.go)
//
// The output is a pure function of the inputs: no timestamps, no map order,
// so the same tree builds byte-identical sites. Every error a chapter can
// cause names the chapter file and line, and one build reports all of them.
// Nothing is fetched from elsewhere: the stylesheet, the script (search,
// theme, copy buttons) and the favicon are embedded in the tool (assets/).
//
// # Chapters and their numbers
//
// A chapter has one title: its # heading must say what its SUMMARY.md link
// says, or the build fails. Numbers mean one thing. The chapter for stage N
// is the one whose file is named for the stage (stageN-name.md), and its
// title must start "Stage N", which is its number; other chapters are not
// numbered, except appendices — the top-level chapters under a part whose
// title starts "Appendix", and mdBook's suffix chapters — which are lettered
// A, B, C in the sidebar, the heading and print.html's contents alike.
//
// # Directives
//
// Block directives stand alone on their line; inline ones may sit anywhere
// in a line. Arguments are key=value; a value with spaces is quoted
// (caption="a \"quoted\" word"). A misspelt key is an error.
//
//	{{#include STAGE/PATH:ANCHOR}}
//	{{#include STAGE/PATH}}
//
// The lines of <root>/STAGE/PATH between "ANCHOR: NAME" and "ANCHOR_END:
// NAME" (in any comment syntax), other anchors' marker lines dropped, common
// indentation removed; with no anchor, the whole file without marker lines.
// Shown highlighted (language from the extension) with the file's own line
// numbers, under a caption with the path, the line span, and for Go the
// declarations shown ("func (e *Engine) pollLoop", "type Engine") or the one
// the region sits in ("in func ..."). The caption links to the file's source
// page with the span marked (src/STAGE/PATH.html#L17-L31), each line number
// to its line. A path, or a symbolic link on the way, that resolves outside
// the repository is refused. Written alone on a line inside a fenced code
// block, it inserts just the lines, mdBook-style, with no caption.
//
//	{{#diff STAGE}}        STAGE against its predecessor in build order
//	{{#diff A B}}          any two stages
//
// A table of changed files (status, +added, −removed), the mechanism's
// files first (Go files that are not tests), then other files, tests and
// READMEs; each name links to that file's hunks, highlighted in the file's
// language, folded in a <details> (the mechanism's open, tests and READMEs
// closed). print.html shows the table only.
//
//	{{#table record=NAME stage=STAGE[,STAGE...] bench=REGEXP unit=UNIT[,UNIT...]
//	         [ref=NAME] [stat=median|best|both|passN] [noisy=0.15] [caption="..."]}}
//
// One row per benchmark of book/records/NAME.json whose name matches bench
// (anchored: ^(?:REGEXP)$; default every benchmark), in record order; one
// column per unit (and per stat with stat=both), each headed by its unit
// and statistic ("time/op · median"). Several stages give a column group
// per stage, rows matched by benchmark name. ref=NAME adds, beside each
// column, the same stage, benchmark and unit from record NAME (its median
// when stat=passN: its passes are another run's), headed by each record's
// machine label. stage=limits selects the record's Limits (Baseline/...
// rows); a stage also finds its own Baseline rows. A figure of several
// passes carries its spread, ± half the range of the passes as a share of
// the median ("1.71 µs ±12%"), or the range itself past 100 % of the median
// ("1.20 µs–3.40 ms"); a row whose (max − min)/median exceeds noisy
// (a fraction, or a percentage: noisy=25%) is marked noisy.
//
//	{{#chart record=NAME stage=STAGE[,STAGE...] bench=REGEXP unit=UNIT [x=KEY]
//	         [series=KEY] [log=auto|on|off] [ref=NAME] [stat=median|best|passN]
//	         [type=line|bar] [marks="V[:LABEL],..."] [title="..."] [caption="..."]}}
//
// An inline SVG, drawn twice: a wide drawing and a narrow one for phones,
// the page showing whichever its column can draw with text of at least 11
// CSS px. Benchmark names are Family/k1=v1/k2=v2; x takes the values of key
// x as categories, in order of first appearance; series splits by another
// key, or by stage when several stages are given. The pseudo-keys stage,
// family and name (the whole benchmark name) work for both. Left out, x is
// the first key whose value varies (or stage), series the next. Categories
// that are stages or names are drawn as bars, others as lines. log=auto
// goes logarithmic when the data span more than 1.5 decades. Whiskers span
// each point's lowest to highest pass. marks= draws dashed verticals: on an
// axis of quantities (gap=0, 3us, 30us, ...; sizes; counts) a value falls
// between the categories it lies between, logarithmically
// (marks="10us,50us:default budget,200us" for the idle budgets on a gap
// axis); on an axis of names a mark must name a category.
//
//	{{#value record=NAME stage=STAGE bench=NAME unit=UNIT [stat=median|best|lowest|highest|passN]}}
//	{{#ratio record=NAME a=STAGE:BENCH b=STAGE:BENCH unit=UNIT [stat=...] [record_b=NAME] [refused=fail|say]}}
//	{{#meta record=NAME field=FIELD}}
//
// Inline: one formatted figure ("1.71 µs", "9.60 GB/s", "2.01 cores"); a/b
// as "3.2×" (b from record_b when given); a fact about the record, FIELD one
// of label, machine, cpu, cores, os, go, date, commit (+dirty when the tree
// was), command, passes, rejected, rows_rerun, threshold, benchtime, source,
// name (passes counts the accepted ones). bench is an exact name here. stat=passN is what accepted pass N
// measured, so two figures with the same passN come from the same run; it
// fails if a row lacks a value for some pass. stat=lowest and stat=highest
// are the smallest and largest value of any pass (for a range in prose,
// whichever passes measured it). The tooltip of a figure names its
// statistic, passes and spread.
//
//	{{#claim record=NAME a=STAGE:BENCH b=STAGE:BENCH unit=UNIT op=OP ratio=R
//	         [record_b=NAME] [stat=...] [show=ratio|a|b|none]}}
//	{{#claim record=NAME a=STAGE:BENCH unit=UNIT op=OP value=V [stat=...] [show=a|none]}}
//
// Inline: a comparison the prose argues from, checked when the book is
// built. The first form holds when a/b OP R, and shows a/b ("0.08×"); the
// second when a OP V, and shows a. OP is <, <=, > or >= (quoted: op="<"),
// or lt, le, gt, ge. V is in unit, or carries its own (300us, 1.5ms,
// 5GB/s, 0.1cores). When the current record contradicts the claim, the
// build fails with the figures it found: re-recording cannot leave a false
// sentence behind. show=none checks without printing. stat=pass1-3,5 checks
// the claim in each of those passes, as one claim per pass would, and
// prints nothing: what a sentence about several passes ("in the first
// three and the fifth") rests on.
//
//	{{#claim record=NAME a=STAGE:BENCH unit=canary-ns op=OP value=V stat=passN [show=a|none]}}
//
// Inline: what a sentence saying a row "ran near" or "ran far" in a pass
// rests on. It holds when both of the row's canaries in pass N, timed just
// before the row and just after it, are OP V; it prints nothing unless
// show=a, which prints the two (canary.go). The bounds are the chapter's
// (the chapter on measuring states the ones this edition's chapters use).
//
//	{{#claim record=NAME a=STAGE:BENCH b=STAGE:BENCH unit=canary-ns placed=same|apart stat=passN}}
//
// Inline, printing nothing: the two rows ran in one placement in pass N
// by the test a paired ratio applies (all four canaries within the
// record's tolerance of one another), or did not.
//
// Ratios from two rows of one record that both carry a canary per pass
// (schema 2's Row.Canary), taken at the median — {{#ratio}} and
// {{#claim}} alike — are computed pass by pass, over the passes in which the
// two rows' canaries, before and after each, lie within the record's canary
// tolerance (30 % by default) of one another: the rows ran in the same
// machine placement. The figure is the median of those per-pass ratios; the
// tooltip says how many passes qualified; no qualifying pass fails the
// build. So does a median of per-pass ratios that falls on the other side
// of 1 from the quotient of the two medians (as printed), or more than 10 %
// from it: a reader divides the figures shown (claim.go). A {{#ratio}}
// with refused=say prints which of the two it was instead ("no ratio: the
// passes disagree", "no ratio: no pass ran both rows in one placement"),
// for a table whose cells a re-take may turn either way. Per-pass ratios
// that span more than 2× are printed with their range, "1.3× (passes
// 0.5–2.1×)". A comparison of two rows of wake-state families (IdleGap,
// IdleMix, IdleWake, Gap, FenceSignal, SpinYield, Trace) is marked
// "(unpaired)", and its page says the book draws no conclusion from it
// alone (wake.go).
//
// Every page holds one figure per quantity (ledger.go): the same row and
// metric on one machine shown twice with two values, from two records, say,
// fails the build. Every page that reads a record taken before later
// changes to the non-test code it measured prints those commits, from git
// log, under each table and chart the record feeds and at the page's end
// for inline figures; Config.Edition fails on any such stale record
// (stale.go).
//
//	{{#records-appendix [noisy=0.15]}}
//
// Every record under book/records, in name order: machine, date, commit
// (flagged when the tree was dirty), passes kept, rows re-run because their
// canary moved, noisy rows, the share of steady rows outside the
// wake-state families, the commits after it (when stale), benchtime and
// environment, and its command in a
// code block of its own, with a copy button (never in a table cell, where a
// regexp's '|' would split it). Each record's heading has the id
// record-NAME, so any chapter can link to appendix.md#record-NAME, on its
// page and in print alike.
//
//	{{#diagram NAME [caption="..."]}}
//
// The SVG file book/diagrams/NAME.svg, inlined so that it follows the
// page's theme: draw with currentColor (the text colour) and these classes,
// which style.css colours for light and dark: d-fg, d-muted, d-accent, d-bg,
// d-soft (fills); d-line, d-line-muted, d-line-accent (strokes); d-add,
// d-del, d-warn (a fill with its stroke). Text should be at least 11 px when
// the diagram is drawn 355 px wide (a phone's column). The file must be
// well-formed XML with an <svg> root and no <script>; its ids are prefixed
// per use, so two diagrams never clash. A missing file fails the build.
//
//	{{#timeline trace=NAME [from=US] [to=US] [first=US] [title="..."] [caption="..."]}}
//
// The device trace book/traces/NAME.json drawn by package trace as an
// inline SVG, the window from..to (or the first US) microseconds of device
// time, under it the line saying how it was made from NAME.meta.json: the
// command (copyable), the commit, date and machine. A missing trace or meta
// file fails the build.
//
// # Records
//
// Every record a build loads is checked with records.Validate: a value no
// run could produce (a negative time, a rate of zero, a median outside the
// values) fails the build, naming the record, the row and the metric. A
// figure is the median of the passes unless stat= says otherwise, and every
// table and chart says which statistic it shows and how much it spread. Each
// ends with "Source: record NAME.json (machine, date, commit)", linking to
// the record, which is copied into the site, and "Reproduce this:" with the
// record's command, commit, date and machine. Anything drawn from a record
// made from a modified tree is flagged "made from a modified tree", inline
// figures with a †.
//
// Units are shown for readers: ns/op and *-ns as ns, µs, ms or s; B/s, MB/s
// and GB/s as MB/s or GB/s (records may store any of the three; a table or
// chart converts between them); cores with two decimals; anything else with
// three significant figures.
//
// # Code
//
// In a `code span` or a fenced block an inline directive yields its bare
// text, so `{{#meta record=stages field=command}}` shows the command as code.
// \{{# writes a literal {{# anywhere, to show the syntax itself.
//
// # The site
//
// Every table, Markdown's too, scrolls inside a frame with a shadow at the
// clipped edge, so no page pans sideways on a phone. The theme follows
// prefers-color-scheme; the ◐ button pins light or dark (localStorage).
// The search box in the sidebar ("/" from anywhere) searches
// search-index.js, every chapter's sections, built at render time and
// loaded on first use. Code blocks carry a copy button. The sidebar opens
// and closes from the keyboard at every width: Tab to its toggle, then
// Space or Enter; Escape closes it where it covers the page.
package book
