//! Hello, taskwatt: three tasks on two pieces of data.
//!
//! ```text
//!   greet(W name) ──► shout(RW name) ──┐
//!                                      ├──► print(R name, R count)
//!   count(W count) ────────────────────┘
//! ```
//!
//! `greet` and `count` run in parallel; `shout` waits for `greet` (read-after-write on
//! `name`); `print` waits for both. Prints the greeting, the worker each task ran on, and the
//! run's counters.
//!
//! Run: `cargo run --release --example hello_world`

use taskwatt::runtime::{Codelet, Runtime, Task};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::builder().app("hello_world").build()?;

    let greet = Codelet::new("greet").cpu(|ctx| {
        *ctx.w::<String>(0) = "hello, world".to_string();
        println!("greet  ran on worker {}", ctx.worker());
    });
    let shout = Codelet::new("shout").cpu(|ctx| {
        let s = ctx.rw::<String>(0);
        *s = s.to_uppercase();
        println!("shout  ran on worker {}", ctx.worker());
    });
    let count = Codelet::new("count").cpu(|ctx| {
        *ctx.w::<usize>(0) = 3;
        println!("count  ran on worker {}", ctx.worker());
    });
    let print = Codelet::new("print").cpu(|ctx| {
        let (s, n) = (ctx.r::<String>(0), ctx.r::<usize>(1));
        for _ in 0..*n {
            println!("print  {s}");
        }
    });

    let name = rt.register(String::new());
    let times = rt.register(0usize);
    rt.submit(Task::new(&greet).w(&name))?;
    rt.submit(Task::new(&count).w(&times))?;
    rt.submit(Task::new(&shout).rw(&name))?;
    rt.submit(Task::new(&print).r(&name).r(&times))?;
    rt.wait_all()?;

    println!(
        "{} workers, policy {}, {:?}",
        rt.workers().len(),
        rt.policy_name(),
        rt.stats()
    );
    assert_eq!(rt.unregister(name)?, "HELLO, WORLD");
    Ok(())
}
