// Package book renders softgpu's book: the Markdown chapters under book/,
// listed in book/SUMMARY.md, to a static site of one page per chapter plus
// print.html, in the manner of mdBook. tools/cmd/book is its command.
//
// The flow of one build:
//
//	SUMMARY.md ──ParseSummary──▶ chapters in reading order        (summary.go)
//	chapter.md ──expandDirectives──▶ Markdown with placeholders  (directive.go)
//	    {{#include}}  real stage files                            (include.go)
//	    {{#diff}}     package stages' normalised diffs            (diff.go)
//	    {{#table}}    a record's benchmarks as a table            (table.go)
//	    {{#value}} {{#ratio}} {{#meta}}  figures and facts         (records.go)
//	    {{#chart}}    an SVG drawn from a record                  (chart.go, svg.go)
//	──goldmark──▶ HTML; heading ids, .md links → .html, chroma    (markdown.go, highlight.go)
//	──page template──▶ sidebar, "On this page", previous/next     (page.go)
//	every page ──CheckLinks──▶ each internal href and #fragment   (linkcheck.go)
//
// The output is a pure function of the inputs: no timestamps, no map order,
// so the same tree builds byte-identical sites. Every error a chapter can
// cause names the chapter file and line, and one build reports all of them.
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
// Shown highlighted (language from the extension) under a caption with the
// path, the line span, and for Go the declarations shown ("func (e *Engine)
// pollLoop", "type Engine") or the one the region sits in ("in func ...").
// Written alone on a line inside a fenced code block, it inserts just the
// lines, mdBook-style, with no caption.
//
//	{{#diff STAGE}}        STAGE against its predecessor in build order
//	{{#diff A B}}          any two stages
//
// A table of changed files (status, +added, −removed) and the whole unified
// diff, highlighted, folded in a <details>.
//
//	{{#table record=NAME stage=STAGE[,STAGE...] bench=REGEXP unit=UNIT[,UNIT...]
//	         [ref=NAME] [stat=best|median|both] [caption="..."]}}
//
// One row per benchmark of book/records/NAME.json whose name matches bench
// (anchored: ^(?:REGEXP)$; default every benchmark), in record order; one
// column per unit (and per stat with stat=both). Several stages give a
// column group per stage, rows matched by benchmark name. ref=NAME adds,
// beside each column, the same stage, benchmark and unit from record NAME,
// headed by each record's machine label. stage=limits selects the record's
// Limits (Baseline/... rows); a stage also finds its own Baseline rows.
//
//	{{#chart record=NAME stage=STAGE[,STAGE...] bench=REGEXP unit=UNIT [x=KEY]
//	         [series=KEY] [log=auto|on|off] [ref=NAME] [stat=best|median]
//	         [type=line|bar] [title="..."] [caption="..."]}}
//
// An inline SVG. Benchmark names are Family/k1=v1/k2=v2; x takes the values
// of key x as categories, in order of first appearance; series splits by
// another key, or by stage when several stages are given. The pseudo-keys
// stage, family and name (the whole benchmark name) work for both. Left out,
// x is the first key whose value varies (or stage), series the next.
// Categories that are stages or names are drawn as bars, others as lines.
// log=auto goes logarithmic when the data span more than 1.5 decades.
//
//	{{#value record=NAME stage=STAGE bench=NAME unit=UNIT [stat=best|median|passN]}}
//	{{#ratio record=NAME a=STAGE:BENCH b=STAGE:BENCH unit=UNIT [stat=...] [record_b=NAME]}}
//	{{#meta record=NAME field=FIELD}}
//
// Inline: one formatted figure ("1.71 µs", "9.60 GB/s", "2.01 cores"); a/b
// as "3.2×" (b from record_b when given); a fact about the record, FIELD one
// of label, machine, cpu, cores, os, go, date, commit, command, passes,
// rejected, threshold, benchtime, source, name (passes counts the accepted
// ones). bench is an exact name here. stat=passN is what accepted pass N
// measured, so two figures with the same passN come from the same run; it
// fails if a row lacks a value for some pass.
//
// Every table and chart ends with "Source: record NAME.json (machine, date,
// commit)", linking to the record, which is copied into the site.
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
package book
