//! Board support shared by the firmware images: a SysTick-based embassy
//! time driver, semihosting exit codes and a panic handler that fails the
//! run.
//!
//! QEMU's `lm3s6965evb` and `mps2-an386` have no embassy HAL, so this crate
//! carries the smallest driver that works: SysTick interrupts at `TICK_HZ`
//! increment a 64-bit tick counter and wake expired timers from
//! `embassy-time-queue-utils`' queue. The SysTick handler itself belongs to
//! each binary (an embassy image calls [`embassy_systick`] from it), so
//! that a binary without embassy, such as `irq-hammer`, can use SysTick
//! for its own interrupt.
#![no_std]

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_semihosting::{debug, hprintln};
use critical_section::Mutex;
use embassy_time_driver::{Driver, TICK_HZ};
use embassy_time_queue_utils::Queue;

/// Core clock that QEMU feeds SysTick on each machine.
#[cfg(target_abi = "eabihf")]
pub const CORE_HZ: u64 = 25_000_000; // mps2-an386
/// Core clock that QEMU feeds SysTick on each machine.
#[cfg(not(target_abi = "eabihf"))]
pub const CORE_HZ: u64 = 12_000_000; // lm3s6965evb

struct SysTickDriver {
    ticks: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let now = self.ticks.borrow(cs).get();
            let mut queue = self.queue.borrow_ref_mut(cs);
            queue.schedule_wake(at, waker);
            // Wakes it at once if `at` has already passed.
            queue.next_expiration(now);
        });
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    ticks: Mutex::new(Cell::new(0)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

/// The embassy time driver's tick: call it from the binary's SysTick
/// handler (`#[cortex_m_rt::exception] fn SysTick() { embassy_systick() }`).
pub fn embassy_systick() {
    critical_section::with(|cs| {
        let ticks = DRIVER.ticks.borrow(cs);
        let now = ticks.get().wrapping_add(1);
        ticks.set(now);
        DRIVER.queue.borrow_ref_mut(cs).next_expiration(now);
    });
}

/// Starts SysTick at `TICK_HZ`. Call once, before any timer is used.
pub fn start_time_driver(mut syst: cortex_m::peripheral::SYST) {
    let reload = (CORE_HZ / TICK_HZ).saturating_sub(1).clamp(1, 0x00FF_FFFF);
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(reload as u32);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// Ends the QEMU run: exit code 0 on success, 1 on failure.
pub fn exit(success: bool) -> ! {
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Not reached under QEMU; on real hardware without a debugger, park.
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("PANIC: {}", info);
    exit(false)
}
