//! gadfly: supervises coding agents through optimization campaigns. An
//! agent may stop only when a measured predicate holds on every scenario;
//! at the moments agents go wrong, gadfly asks one short, checkable question.

pub mod agent;
pub mod audit;
pub mod auth;
pub mod bank;
pub mod beam;
pub mod campaign;
pub mod classify;
pub mod cli;
pub mod client;
pub mod config;
pub mod console;
pub mod constraints;
pub mod daemon;
pub mod demo;
pub mod doctor;
pub mod gate;
pub mod harness;
pub mod hook;
pub mod http_serve;
pub mod jobs;
pub mod metrics;
pub mod moments;
pub mod openapi;
pub mod predicate;
pub mod process;
pub mod results;
pub mod server;
pub mod signing;
pub mod snapshot;
pub mod spool;
pub mod store;
pub mod supervisor;
pub mod telemetry;
pub mod web;
pub mod worker;
