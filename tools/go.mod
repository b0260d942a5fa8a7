module softgpu/tools

go 1.26.0

tool golang.org/x/perf/cmd/benchstat

require (
	github.com/alecthomas/chroma/v2 v2.27.0
	github.com/stretchr/testify v1.11.1
	github.com/yuin/goldmark v1.8.7
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
)

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/dlclark/regexp2/v2 v2.2.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
