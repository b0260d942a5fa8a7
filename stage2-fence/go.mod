module softgpu/stage2-fence

go 1.26.0
