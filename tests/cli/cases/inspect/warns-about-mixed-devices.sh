# storages on cuda:0, cuda:1 and cpu in one file are warned about
"$T" inspect "$S/corpus/torch-2.15/mixed_devices.pt"
