module softgpu/stage0-mailbox

go 1.26
