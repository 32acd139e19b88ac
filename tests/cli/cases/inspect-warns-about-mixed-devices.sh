# storages on cuda:0, cuda:1 and cpu in one file are warned about
"$T" inspect "$C/torch-2.14/mixed_devices.pt"
