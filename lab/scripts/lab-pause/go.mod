module gpufleet.invalid/lab-pause

go 1.22
