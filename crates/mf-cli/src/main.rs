//! `mf`: the headless face of Measured Forgetting (under construction).

fn main() {
    println!("mf: under construction");
}
