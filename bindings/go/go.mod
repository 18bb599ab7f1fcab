module loaderx.invalid/zrecord

go 1.19
