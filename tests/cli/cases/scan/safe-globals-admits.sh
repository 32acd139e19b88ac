# --safe-globals admits names as inspect's does: a pickle of an admitted class is then safe
printf "\200\002cmymod\nConfig\nq\000)\201q\001}q\002b." >cfg.pkl
"$T" scan -q cfg.pkl || echo "exit $?"
"$T" scan --safe-globals mymod.Config cfg.pkl
