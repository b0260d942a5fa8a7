module softgpu/stage1-ring

go 1.26.0

require golang.org/x/sys v0.50.0
