module loaderx.invalid/zrbench

go 1.22

require loaderx.invalid/zrecord v0.0.0

replace loaderx.invalid/zrecord => ../../../bindings/go
