import os

# Set before torch / numpy spin up their thread pools: keeps timings stable on small CI boxes.
os.environ["OMP_NUM_THREADS"] = "1"
