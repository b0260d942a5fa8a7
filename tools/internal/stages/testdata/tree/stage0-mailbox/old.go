package softgpu

// Old is gone in stage1-ring.
const Old = 1
