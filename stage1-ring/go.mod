module softgpu/stage1-ring

go 1.26.0
